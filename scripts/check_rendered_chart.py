#!/usr/bin/env python3
"""Checks what a schema cannot see in `helm template` output, and lays the
rendered config out as the pod would see it.

Kubernetes schemas accept a Service whose selector matches no pod, a probe on a
port the container does not expose, a NetworkPolicy that cuts off the proxy
port, or a ServiceMonitor or PrometheusRule (CRDs, so they have no schema at
all) aimed at the wrong Service or malformed. Each of those installs cleanly
and then fails quietly, so this script follows every cross-reference instead.

Usage: check_rendered_chart.py RENDERED.yaml OUT_DIR RELEASE_NAMESPACE

OUT_DIR receives the projected config volume: robotsguard.yaml plus the
robots.txt files under the paths the Deployment projects them to, so that
`robotsguard validate --config OUT_DIR/robotsguard.yaml` resolves relative
paths exactly as in the pod. Exits 1 listing every problem found.
"""

import json
import os
import re
import sys

import yaml

CONFIG_KEY = "robotsguard.yaml"

problems = []


def problem(message):
    problems.append(message)


def by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def one(docs, kind, component=None):
    found = [
        d
        for d in by_kind(docs, kind)
        if component is None
        or d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component
    ]
    if len(found) != 1:
        problem(f"expected one {kind} {component or ''}, found {len(found)}")
        return None
    return found[0]


def optional(docs, kind, component, wanted):
    """The one object of this component when wanted (as `one`), else a problem if any exists."""
    if wanted:
        return one(docs, kind, component)
    found = [
        d
        for d in by_kind(docs, kind)
        if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component
    ]
    if found:
        problem(f"expected no {kind} {component}, found {len(found)}")
    return None


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def duration_seconds(text):
    """robotsguard durations: 250ms, 10s, 1m30s, 1d (rounded up)."""
    parts = re.findall(r"([0-9]+)(ms|d|h|m|s)", str(text))
    if "".join(n + u for n, u in parts) != str(text):
        problem(f"unreadable duration {text!r}")
        return 0
    scale = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    millis = sum(int(n) * scale[u] for n, u in parts)
    return -(-millis // 1000)


def port_of(address):
    return int(re.search(r"([0-9]+)$", str(address)).group(1))


def check_services(docs, pod_labels, container_ports):
    for service in by_kind(docs, "Service"):
        name = service["metadata"]["name"]
        if not selects(service["spec"]["selector"], pod_labels):
            problem(f"Service {name} selects no pod of the Deployment")
        for port in service["spec"]["ports"]:
            if port["targetPort"] not in container_ports:
                problem(f"Service {name} targets port {port['targetPort']!r}, not a container port")
    # The proxy and decision Services exist exactly when the container has their ports.
    proxy = optional(docs, "Service", "proxy", "http" in container_ports)
    admin = one(docs, "Service", "admin")
    if admin and admin["spec"]["type"] != "ClusterIP":
        problem("the admin Service must stay ClusterIP")
    if proxy and any(p["targetPort"] == "admin" for p in proxy["spec"]["ports"]):
        problem("the proxy Service exposes the admin port")
    decision = optional(docs, "Service", "decision", "decision" in container_ports)
    if decision:
        if decision["spec"]["type"] != "ClusterIP":
            problem("the decision Service must stay ClusterIP")
        if [p["targetPort"] for p in decision["spec"]["ports"]] != ["decision"]:
            problem("the decision Service must expose the decision port only")
    return admin


def check_service_monitor(docs, admin, namespace, token):
    """token: the (Secret, key) robotsguard's admin token_file is projected
    from, or None when the admin listener needs no token."""
    for monitor in by_kind(docs, "ServiceMonitor"):
        spec = monitor["spec"]
        if admin is None:
            return
        if not selects(spec["selector"]["matchLabels"], admin["metadata"]["labels"]):
            problem("ServiceMonitor does not select the admin Service")
        others = [
            s["metadata"]["name"]
            for s in by_kind(docs, "Service")
            if s is not admin and selects(spec["selector"]["matchLabels"], s["metadata"]["labels"])
        ]
        if others:
            problem(f"ServiceMonitor also selects {others}")
        admin_ports = {p["name"] for p in admin["spec"]["ports"]}
        for endpoint in spec["endpoints"]:
            if endpoint.get("port") not in admin_ports:
                problem(f"ServiceMonitor scrapes port {endpoint.get('port')!r}, not a port of the admin Service")
            if endpoint.get("path") != "/metrics":
                problem("ServiceMonitor does not scrape /metrics")
            auth = endpoint.get("authorization")
            if token is None:
                if auth is not None:
                    problem("ServiceMonitor sends a token, but the admin listener has no token_file")
                continue
            if token == UNKNOWN_TOKEN:
                problem("ServiceMonitor cannot send an admin token that is not from adminToken's Secret")
                continue
            credentials = (auth or {}).get("credentials") or {}
            sent = (credentials.get("name"), credentials.get("key"))
            if (auth or {}).get("type") != "Bearer" or sent != token:
                problem(
                    f"ServiceMonitor must send the admin token as Bearer from Secret {token[0]} "
                    f"key {token[1]}, sends {auth}"
                )
        if "namespace" in monitor["metadata"]:
            names = spec.get("namespaceSelector", {}).get("matchNames", [])
            if names != [namespace]:
                problem("a ServiceMonitor in another namespace must select the release namespace")


def check_network_policy(docs, pod_labels, container):
    """Whatever a NetworkPolicy admits, the proxy and decision Services must
    still reach their ports, the admin port must not be open to all, and restricted egress must
    still reach DNS."""
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    proxies = [
        s for s in by_kind(docs, "Service")
        if s["metadata"].get("labels", {}).get("app.kubernetes.io/component") in ("proxy", "decision")
    ]
    for policy in by_kind(docs, "NetworkPolicy"):
        name = policy["metadata"]["name"]
        spec = policy["spec"]
        if not selects(spec["podSelector"].get("matchLabels", {}), pod_labels):
            problem(f"NetworkPolicy {name} selects no pod of the Deployment")
            continue
        admitted = {}  # container port name -> [rules admitting it]
        for rule in spec.get("ingress", []):
            if not rule.get("ports"):  # a rule without ports admits every port
                for port_name in ports:
                    admitted.setdefault(port_name, []).append(rule)
            for port in rule.get("ports") or []:
                target = port["port"]
                if isinstance(target, int):
                    matching = [n for n, number in ports.items() if number == target]
                else:
                    matching = [target] if target in ports else []
                if not matching:
                    problem(f"NetworkPolicy {name} admits port {target!r}, not a container port")
                for port_name in matching:
                    admitted.setdefault(port_name, []).append(rule)
        for proxy in proxies:
            for port in proxy["spec"]["ports"]:
                if port["targetPort"] not in admitted:
                    problem(f"NetworkPolicy {name} cuts off Service {proxy['metadata']['name']}'s port {port['targetPort']}")
        for rule in admitted.get("admin", []):
            if not rule.get("from"):
                problem(f"NetworkPolicy {name} opens the admin port to everyone")
        if "Egress" in spec.get("policyTypes", []):
            egress = spec.get("egress") or []
            dns = any(
                not rule.get("ports") or any(p.get("port") in (53, "dns", "dns-tcp") for p in rule["ports"])
                for rule in egress
            )
            if not dns:
                problem(f"NetworkPolicy {name} restricts egress without admitting DNS (port 53)")


DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


def check_prometheus_rules(docs):
    for rules in by_kind(docs, "PrometheusRule"):
        name = rules["metadata"]["name"]
        groups = (rules.get("spec") or {}).get("groups") or []
        if not groups:
            problem(f"PrometheusRule {name} has no groups")
        group_names = [g.get("name") for g in groups]
        if len(set(group_names)) != len(group_names) or not all(group_names):
            problem(f"PrometheusRule {name}: group names must be present and unique, got {group_names}")
        for group in groups:
            if not group.get("rules"):
                problem(f"PrometheusRule {name} group {group.get('name')!r} has no rules")
            for rule in group.get("rules") or []:
                label = rule.get("alert") or rule.get("record") or rule
                if not (isinstance(rule.get("expr"), str) and rule["expr"].strip()):
                    problem(f"PrometheusRule {name}: rule {label!r} has no expr")
                if ("alert" in rule) == ("record" in rule):
                    problem(f"PrometheusRule {name}: rule {label!r} needs exactly one of alert and record")
                if "for" in rule and not DURATION.match(str(rule["for"])):
                    problem(f"PrometheusRule {name}: rule {label!r} has an unreadable `for` {rule['for']!r}")


def check_scheduling(pod_spec, pod_labels):
    for constraint in pod_spec.get("topologySpreadConstraints", []):
        selector = (constraint.get("labelSelector") or {}).get("matchLabels")
        if not selector or not selects(selector, pod_labels):
            problem(f"topology spread over {constraint['topologyKey']} does not count the Deployment's own pods")


def check_scaling(docs, deployment, pod_labels):
    hpa = by_kind(docs, "HorizontalPodAutoscaler")
    for h in hpa:
        ref = h["spec"]["scaleTargetRef"]
        if (ref["kind"], ref["name"]) != ("Deployment", deployment["metadata"]["name"]):
            problem("HPA does not target the Deployment")
    if hpa and "replicas" in deployment["spec"]:
        problem("with an HPA the Deployment must leave `replicas` to it")
    for pdb in by_kind(docs, "PodDisruptionBudget"):
        if not selects(pdb["spec"]["selector"]["matchLabels"], pod_labels):
            problem("PodDisruptionBudget selects no pod of the Deployment")


def check_dashboard(docs):
    for cm in by_kind(docs, "ConfigMap"):
        for key, value in (cm.get("data") or {}).items():
            if key.endswith(".json"):
                try:
                    dashboard = json.loads(value)
                except ValueError as e:
                    problem(f"dashboard {key} is not JSON: {e}")
                    continue
                if not dashboard.get("panels"):
                    problem(f"dashboard {key} has no panels")
                if "grafana_dashboard" not in cm["metadata"].get("labels", {}):
                    problem(f"dashboard ConfigMap {cm['metadata']['name']} lacks the sidecar label")


# What a Secret's stand-in holds where an empty file would not pass `robotsguard validate`.
SECRET_STAND_INS = {"state/redis-url": "rediss://stand-in.invalid:6379/0\n"}


def project_config_volume(docs, pod_spec, container, out_dir, secrets):
    """Writes the projected volume mounted at the config path into out_dir and
    returns the path of the config file inside it. Fills `secrets` with the
    (Secret, key) projected at each path in the volume."""
    args = container["args"]
    config_path = args[args.index("--config") + 1]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    mount_path = os.path.dirname(config_path)
    mount = mounts.get(mount_path)
    if mount is None:
        problem(f"--config {config_path} is not inside a mounted volume")
        return None
    if "subPath" in mount:
        problem("the config volume uses subPath, which never sees ConfigMap updates")
    volume = next(v for v in pod_spec["volumes"] if v["name"] == mount["name"])
    config_maps = {c["metadata"]["name"]: c.get("data") or {} for c in by_kind(docs, "ConfigMap")}
    for source in volume["projected"]["sources"]:
        if "configMap" in source:
            name = source["configMap"]["name"]
            if name not in config_maps:
                problem(f"the config volume projects ConfigMap {name}, which the chart does not render")
                continue
            for item in source["configMap"]["items"]:
                if item["key"] not in config_maps[name]:
                    problem(f"ConfigMap {name} has no key {item['key']!r}")
                    continue
                target = os.path.join(out_dir, item["path"])
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "w") as f:
                    f.write(config_maps[name][item["key"]])
        elif "secret" in source:
            # Stand-ins: the Secret is created by the operator, not the chart.
            for item in source["secret"]["items"]:
                secrets[os.path.normpath(item["path"])] = (source["secret"]["name"], item["key"])
                target = os.path.join(out_dir, item["path"])
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "w") as f:
                    f.write(SECRET_STAND_INS.get(os.path.normpath(item["path"]), ""))
    inside = os.path.join(out_dir, os.path.relpath(config_path, mount_path))
    if not os.path.exists(inside):
        problem(f"the config volume holds no {os.path.basename(config_path)}")
        return None
    return inside


# A token_file the chart does not project from a Secret it knows.
UNKNOWN_TOKEN = ("", "")


def admin_token(config_file, container, secrets):
    """The (Secret, key) behind admin.token_file, or None without a token."""
    with open(config_file) as f:
        admin = yaml.safe_load(f)["admin"]
    if not isinstance(admin, dict) or "token_file" not in admin:
        return None
    path = admin["token_file"]
    config_dir = os.path.dirname(container["args"][container["args"].index("--config") + 1])
    inside = os.path.normpath(os.path.relpath(os.path.join(config_dir, path), config_dir))
    if inside.startswith(".."):
        mounts = [m["mountPath"] for m in container["volumeMounts"]]
        if not any(path.startswith(m.rstrip("/") + "/") for m in mounts):
            problem(f"admin token_file {path} is not inside a mounted volume")
        return UNKNOWN_TOKEN  # mounted by the user (extraVolumes)
    if inside not in secrets:
        problem(f"admin token_file {path} is not a Secret key projected into the config volume")
        return UNKNOWN_TOKEN
    return secrets[inside]


def check_admin_hosts(config_file, admin_service, namespace):
    """The admin listener answers only a Host that names it: in-cluster clients calling the admin
    Service by name need that name in admin.hosts (probes and scrapes send the pod IP, which a
    wildcard listener accepts)."""
    with open(config_file) as f:
        admin = yaml.safe_load(f)["admin"]
    if admin_service is None:
        return
    hosts = admin.get("hosts", []) if isinstance(admin, dict) else []
    name = admin_service["metadata"]["name"]
    for wanted in (name, f"{name}.{namespace}", f"{name}.{namespace}.svc"):
        if wanted not in hosts:
            problem(f"admin.hosts lacks {wanted}: clients calling the admin Service by name would get 421")


def check_config_against_pod(config_file, container, pod_spec):
    with open(config_file) as f:
        config = yaml.safe_load(f)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    base = os.path.dirname(config_file)

    listen = config["listen"] if isinstance(config["listen"], list) else [config["listen"]]
    listen_ports = set()
    for entry in listen:
        address = entry["address"] if isinstance(entry, dict) else entry
        listen_ports.add(port_of(address))
        if isinstance(entry, dict) and "tls" in entry:
            tls = entry["tls"]
            pairs = tls["certs"] if "certs" in tls else [tls]
            for pair in pairs:
                for key in ("cert", "key"):
                    path = os.path.join(base, pair[key])
                    if not os.path.exists(path):
                        problem(f"listener {address}: {key} {pair[key]} is not in the config volume")
    for name in ("http", "https"):
        if name in ports and ports[name] not in listen_ports:
            problem(f"container port {name} ({ports[name]}) has no listener in the config")
    if listen and "http" not in ports:
        problem("the config has proxy listeners but the container exposes no proxy port")

    decision = config.get("decision")
    if "decision" in ports:
        decision_ports = {port_of(a) for a in (decision or {}).get("listen", [])}
        if ports["decision"] not in decision_ports:
            problem(f"container port decision ({ports['decision']}) has no decision listener in the config")
        # Without trusted_callers robotsguard answers loopback only, and in-cluster callers are pods.
        callers = (decision or {}).get("trusted_callers") or []
        if not callers or all(re.match(r"^(127\.|::1(/|$))", str(c)) for c in callers):
            problem("decision.trusted_callers admits only loopback; the ingress controller's pods would get 403")
    elif decision:
        problem("the config has a decision listener but the container exposes no decision port")
    admin = config["admin"]["address"] if isinstance(config["admin"], dict) else config["admin"]
    if port_of(admin) != ports.get("admin"):
        problem(f"config admin {admin} is not the container's admin port")
    if re.match(r"^(127\.|\[::1\]|localhost)", str(admin)):
        problem("the admin listener is on loopback; probes cannot reach it")

    redis = (config.get("state") or {}).get("redis") or {}
    if "url_file" in redis and not os.path.exists(os.path.join(base, redis["url_file"])):
        problem(f"state.redis.url_file {redis['url_file']} is not in the config volume")
    for key, path in (redis.get("tls") or {}).items():
        if not os.path.exists(os.path.join(base, path)):
            problem(f"state.redis.tls.{key} {path} is not in the config volume")

    for origin in config["origins"]:
        robots = origin.get("robots") or {}
        if robots.get("source") == "file":
            path = os.path.join(base, robots["path"])
            if not os.path.exists(path):
                problem(f"origin {origin['name']}: robots file {robots['path']} is not in the config volume")

    grace = duration_seconds((config.get("shutdown") or {}).get("grace", "10s"))
    pre_stop = (
        container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    )
    budget = pod_spec["terminationGracePeriodSeconds"]
    if budget <= pre_stop + grace:
        problem(f"terminationGracePeriodSeconds {budget} <= preStop {pre_stop} + grace {grace}")


def check_evidence(docs, config_file, container, pod_spec, secrets):
    """evidence.key_file is a Secret key projected into the config volume, and evidence.dir a
    writable volume of its own (the root filesystem is read-only): a claim the chart renders or
    one the operator names, or an emptyDir."""
    with open(config_file) as f:
        evidence = (yaml.safe_load(f) or {}).get("evidence") or {}
    if not evidence.get("enabled"):
        return
    base = os.path.dirname(config_file)
    key = os.path.normpath(os.path.relpath(os.path.join(base, evidence.get("key_file", "")), base))
    if key not in secrets:
        problem(f"evidence.key_file {evidence.get('key_file')} is not a Secret key projected into the config volume")
    directory = evidence.get("dir", "")
    mount = next(
        (m for m in container["volumeMounts"] if m["mountPath"] == directory), None
    )
    if mount is None:
        problem(f"evidence.dir {directory} is not a volume mounted in the container")
        return
    if mount.get("readOnly"):
        problem(f"evidence.dir {directory} is mounted read-only")
    volume = next((v for v in pod_spec["volumes"] if v["name"] == mount["name"]), {})
    claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
    if claim is None and "emptyDir" not in volume:
        problem(f"evidence.dir {directory} is neither a claim nor an emptyDir")
    rendered = {c["metadata"]["name"]: c for c in by_kind(docs, "PersistentVolumeClaim")}
    if claim in rendered:
        annotations = rendered[claim]["metadata"].get("annotations") or {}
        if annotations.get("helm.sh/resource-policy") != "keep":
            problem(f"the evidence claim {claim} would be deleted with the release")
        deployment = one(docs, "Deployment") or {}
        several = bool(by_kind(docs, "HorizontalPodAutoscaler")) or (
            deployment.get("spec", {}).get("replicas", 1) > 1
        )
        if several and "ReadWriteMany" not in rendered[claim]["spec"]["accessModes"]:
            problem(f"the evidence claim {claim} is mounted by several pods but is not ReadWriteMany")


def main():
    rendered, out_dir, namespace = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(rendered) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]

    deployment = one(docs, "Deployment")
    if deployment is None:
        sys.exit("\n".join(problems))
    pod = deployment["spec"]["template"]
    pod_spec = pod["spec"]
    pod_labels = pod["metadata"]["labels"]
    container = pod_spec["containers"][0]
    container_ports = {p["name"] for p in container["ports"]}

    if not selects(deployment["spec"]["selector"]["matchLabels"], pod_labels):
        problem("the Deployment's selector does not match its own pods")
    # The probes carry no token, so they must stay on the two paths that need none.
    probes = [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")]
    if "startupProbe" in container:
        probes.append(("startupProbe", "/healthz"))
    for probe, path in probes:
        get = container.get(probe, {}).get("httpGet", {})
        if get.get("path") != path or get.get("port") not in container_ports:
            problem(f"{probe} must GET {path} on a container port, got {get}")
    security = container["securityContext"]
    if not (
        security.get("readOnlyRootFilesystem")
        and security.get("allowPrivilegeEscalation") is False
        and "ALL" in security.get("capabilities", {}).get("drop", [])
        and pod_spec["securityContext"].get("runAsNonRoot")
    ):
        problem("the container must run non-root, read-only, without capabilities")

    admin = check_services(docs, pod_labels, container_ports)
    check_network_policy(docs, pod_labels, container)
    check_scaling(docs, deployment, pod_labels)
    check_scheduling(pod_spec, pod_labels)
    check_dashboard(docs)
    check_prometheus_rules(docs)

    secrets = {}
    config_file = project_config_volume(docs, pod_spec, container, out_dir, secrets)
    if config_file:
        check_config_against_pod(config_file, container, pod_spec)
        check_admin_hosts(config_file, admin, namespace)
        check_service_monitor(docs, admin, namespace, admin_token(config_file, container, secrets))
        check_evidence(docs, config_file, container, pod_spec, secrets)

    if problems:
        print(f"{rendered}:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
