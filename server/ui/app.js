// the dashboard
