# Packaging: what the Debian package adds to `cmake --install` (the Python
# binding, the systemd unit for `opcache serve`, its default configuration and
# tokens file, the docs) and the CPack settings scripts/package.sh uses.
