#!/usr/bin/env python3
"""The Kubernetes test's manifest for `podman kube play` (scripts/test-containers.sh):
deploy/kubernetes/'s serve and worker workloads as they are, with the test's
image, one serve replica and the probes on the settings' ports (one host
network), and the test's own settings
ConfigMap and Secrets' files (the test cluster, the simulator, free ports)
in place of the examples. Prints the YAML.

  kube-play.py IMAGE SETTINGS_JSON SECRETS_DIR
SETTINGS_JSON: {"NAME": "value"}; SECRETS_DIR: a folder per Secret
(siwa-serve/, siwa-worker/), a file per key.
"""
import json
import sys

import yaml

image, settings, secrets = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
documents = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "siwa-settings"}, "data": settings}]
for path in ("deploy/kubernetes/serve.yaml", "deploy/kubernetes/worker.yaml"):
    with open(path) as file:
        for document in yaml.safe_load_all(file):
            if document["kind"] == "Deployment":
                document["spec"]["replicas"] = 1
                pod = document["spec"]["template"]["spec"]
                for container in pod["containers"]:
                    assert container["image"] == "siwa", container["image"]
                    container["image"] = image
                    # On the host's network a pod has no port mappings, and
                    # its listeners are on the settings' ports: the probes ask those.
                    ports = {"public": settings["SIWA_HTTP_PORT"], "api": settings["SIWA_API_HTTP_PORT"],
                             "metrics": settings["SIWA_WORKER_METRICS_PORT" if container["name"] == "worker" else "SIWA_METRICS_HTTP_PORT"]}
                    container.pop("ports", None)
                    for probe in ("livenessProbe", "readinessProbe"):
                        container[probe]["httpGet"]["port"] = int(ports[container[probe]["httpGet"]["port"]])
                # podman 4.3's kube play crashes on secret volumes (a nil
                # pointer in VolumeFromSecret): the same files, from a folder.
                for volume in pod["volumes"]:
                    if "secret" in volume:
                        name = volume.pop("secret")["secretName"]
                        volume["hostPath"] = {"path": f"{secrets}/{name}", "type": "Directory"}
            documents.append(document)
yaml.safe_dump_all(documents, sys.stdout, sort_keys=False)
