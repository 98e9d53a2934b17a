#!/usr/bin/env python3
"""The replica deployment files of packaging/ (docs/operations.md "Replicas"),
checked against the product they configure, so that a renamed setting or a
moved health route breaks this test instead of a team's rollout:

* packaging/kubernetes/opcache-serve.yaml: a Deployment of at least two
  replicas whose readiness and liveness probes GET /healthz on the container's
  port, which serve.ini listens on; a Service selecting its pods; the config
  mounted where the command line reads it; every OPCACHE_SERVE_* variable a
  real setting.
* packaging/replicas/serve-replica.ini: every key a [serve] key of
  `opcache serve --help`, and storage an s3:// URL.
* packaging/replicas/opcache-serve.service.d/replica.conf: a drop-in of the
  Debian package's unit whose variables are real settings.

    tests/packaging/test_replica_packaging.py OPCACHE_BINARY SOURCE_DIR
"""
import configparser
import os
import re
import subprocess
import sys
import unittest

import yaml  # Debian's python3-yaml, installed by scripts/install-deps.sh

OPCACHE = sys.argv.pop(1)
SOURCE_DIR = os.path.realpath(sys.argv.pop(1))
PACKAGING = os.path.join(SOURCE_DIR, "packaging")


def serve_help():
    return subprocess.run([OPCACHE, "serve", "--help"], check=True, capture_output=True, text=True).stdout


HELP = serve_help()
SETTING_VARIABLES = set(re.findall(r"\bOPCACHE_SERVE_[A-Z_]+\b", HELP))
SERVE_KEYS = set(re.findall(r"\[serve\] (\w+)", HELP))


def read(*parts):
    with open(os.path.join(PACKAGING, *parts), encoding="utf-8") as file:
        return file.read()


def replica_ini():
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(read("replicas", "serve-replica.ini"))
    return parser


def documents():
    return {document["kind"]: document for document in yaml.safe_load_all(read("kubernetes", "opcache-serve.yaml"))}


class ReplicaPackaging(unittest.TestCase):
    def test_the_help_lists_settings(self):
        self.assertIn("OPCACHE_SERVE_REPLICA", SETTING_VARIABLES)
        self.assertIn("storage", SERVE_KEYS)

    def test_ini_keys_are_serve_settings(self):
        ini = replica_ini()
        self.assertEqual(ini.sections(), ["serve"])
        for key in ini["serve"]:
            self.assertIn(key, SERVE_KEYS, f"serve-replica.ini: [serve] {key} is not a setting of opcache serve")
        self.assertTrue(ini["serve"]["storage"].startswith("s3://"), "replicas share an s3:// storage")

    def test_deployment_probes_health_on_the_listening_port(self):
        deployment = documents()["Deployment"]
        self.assertGreaterEqual(deployment["spec"]["replicas"], 2)
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        port = next(p for p in container["ports"] if p["name"] == "http")
        listen_port = int(replica_ini()["serve"]["listen"].rsplit(":", 1)[1])
        self.assertEqual(port["containerPort"], listen_port)
        for probe in ("readinessProbe", "livenessProbe"):
            self.assertEqual(container[probe]["httpGet"]["path"], "/healthz", probe)
            self.assertEqual(container[probe]["httpGet"]["port"], "http", probe)

    def test_deployment_reads_the_mounted_config_and_real_variables(self):
        deployment = documents()["Deployment"]
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        config_path = container["args"][container["args"].index("--config") + 1]
        mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
        self.assertEqual(mounts.get(config_path), "config")
        for variable in container["env"]:
            if variable["name"].startswith("OPCACHE_SERVE_"):
                self.assertIn(variable["name"], SETTING_VARIABLES)
        replica = next(v for v in container["env"] if v["name"] == "OPCACHE_SERVE_REPLICA")
        self.assertEqual(replica["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name")
        # The grace outlasts the server's own shutdown grace (30 s).
        self.assertGreater(pod["terminationGracePeriodSeconds"], 30)

    def test_service_selects_the_pods(self):
        docs = documents()
        selector = docs["Service"]["spec"]["selector"]
        labels = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
        for key, value in selector.items():
            self.assertEqual(labels.get(key), value)
        self.assertEqual(docs["Service"]["spec"]["ports"][0]["targetPort"], "http")

    def test_systemd_drop_in_sets_real_variables(self):
        drop_in = read("replicas", "opcache-serve.service.d", "replica.conf")
        self.assertIn("[Service]", drop_in)
        variables = re.findall(r"^Environment=(\w+)=", drop_in, re.MULTILINE)
        self.assertIn("OPCACHE_SERVE_REPLICA", variables)
        for variable in variables:
            self.assertIn(variable, SETTING_VARIABLES)


if __name__ == "__main__":
    unittest.main(verbosity=2)
