#!/usr/bin/env bash
# Validates the Helm chart offline:
#   1. helm lint --strict with the default values and every helm/robotsguard/ci/*-values.yaml;
#   2. helm template with each, validated against the Kubernetes schemas of the oldest version
#      the chart supports and the newest one kubernetes-validate bundles;
#   3. cross-references a schema cannot see (scripts/check_rendered_chart.py);
#   4. `robotsguard validate` on the config as the pod would see it;
#   5. values the chart must refuse, each with its own message;
#   6. the config JSON Schema against the examples and the rendered configs
#      (scripts/check-config-schema.py), and the chart README against its generator.
#
# Needs a built robotsguard ($ROBOTSGUARD, default target/debug/robotsguard), Python >= 3.11
# with venv, and the package index for the first run; tools are cached under .cache/.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
chart="$root/helm/robotsguard"
cache="${ROBOTSGUARD_CACHE:-$root/.cache}"
robotsguard="${ROBOTSGUARD:-${CARGO_TARGET_DIR:-$root/target}/debug/robotsguard}"
# Oldest supported (Chart.yaml kubeVersion) and newest bundled by kubernetes-validate.
kube_versions=(1.30.0 1.37.0)
namespace=edge

if [ ! -x "$robotsguard" ]; then
    echo "validate-helm: $robotsguard is missing; run cargo build first" >&2
    exit 2
fi

# rpds-py, pinned below, needs Python 3.11; say so rather than let pip fail to resolve.
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "validate-helm: needs Python >= 3.11, found $(python3 --version 2>&1)" >&2
    exit 2
fi

# Python tools in a venv keyed by the pinned requirements, so a change of pins gets a fresh one.
requirements="$root/scripts/helm-ci-requirements.txt"
key="$(sha256sum "$requirements" | cut -c1-12)"
venv="$cache/helm-ci/venv-$key"
if [ ! -f "$venv/.complete" ]; then
    echo "validate-helm: installing $(grep -c '==' "$requirements") pinned Python packages" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        --only-binary=:all: -r "$requirements"
    touch "$venv/.complete"
fi
python="$venv/bin/python"
helm="$(PYTHON="$python" "$root/scripts/get-helm.sh")"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

check_case() {
    local name="$1"
    shift
    local rendered="$work/$name.yaml"
    echo "validate-helm: $name" >&2
    "$helm" lint --strict --quiet "$chart" "$@" >"$work/lint.log" 2>&1 || {
        cat "$work/lint.log" >&2
        return 1
    }
    "$helm" template robotsguard "$chart" --namespace "$namespace" "$@" >"$rendered"
    for version in "${kube_versions[@]}"; do
        # CRDs (the ServiceMonitor, the PrometheusRule) have no bundled schema and only warn;
        # check_rendered_chart.py covers them.
        "$venv/bin/kubernetes-validate" --strict --quiet --no-warn -k "$version" "$rendered"
    done
    "$python" "$root/scripts/check_rendered_chart.py" "$rendered" "$work/$name.volume" "$namespace"
    "$robotsguard" validate --config-only --config "$work/$name.volume/robotsguard.yaml" >/dev/null
    rendered_configs+=("$work/$name.volume/robotsguard.yaml")
}

rendered_configs=()

check_case default
for values in "$chart"/ci/*-values.yaml; do
    check_case "$(basename "$values" .yaml)" -f "$values"
done

# decision-only-values.yaml must have rendered the decision service alone: `listen: []`.
if ! grep -qE '^listen: \[\]$' "$work/decision-only-values.volume/robotsguard.yaml"; then
    echo "validate-helm: decision-only-values.yaml no longer renders \`listen: []\`" >&2
    exit 1
fi

# words-values.yaml writes `mode: off`: Helm must have turned it into a boolean (else the case
# above proved nothing), and robotsguard accepted that boolean as `off`.
if ! grep -qE '^ *mode: false$' "$work/words-values.volume/robotsguard.yaml"; then
    echo "validate-helm: words-values.yaml no longer renders \`mode: false\`" >&2
    exit 1
fi

# Values that would deploy a pod that cannot work must not render.
refuse() {
    local expected="$1"
    shift
    if "$helm" template robotsguard "$chart" "$@" >/dev/null 2>"$work/refused.log"; then
        echo "validate-helm: rendered, but must refuse: $*" >&2
        return 1
    fi
    if ! grep -qF -- "$expected" "$work/refused.log"; then
        echo "validate-helm: refused without saying \"$expected\": $*" >&2
        cat "$work/refused.log" >&2
        return 1
    fi
}
echo "validate-helm: values the chart refuses" >&2
refuse "listens on loopback" --set config.admin=127.0.0.1:9090
refuse "must use ports.admin" --set config.admin=0.0.0.0:9999
# The same checks when admin is written as a mapping, or as a string that adminToken extends.
refuse "config.admin.address (127.0.0.1:9090) listens on loopback" \
    --set config.admin.address=127.0.0.1:9090
refuse "config.admin.address (0.0.0.0:9999) must use ports.admin" \
    --set config.admin.address=0.0.0.0:9999
refuse "listens on loopback" --set adminToken.secretName=token --set config.admin=127.0.0.1:9090
refuse "config.admin: address is required" --set config.admin.token_file=/run/token
# Two token sources, or a token the ServiceMonitor could not send.
refuse "not both" --set adminToken.secretName=token \
    --set config.admin.address=0.0.0.0:9090 --set config.admin.token_file=/run/token
refuse "ServiceMonitor would scrape /metrics without the token" --set serviceMonitor.enabled=true \
    --set config.admin.address=0.0.0.0:9090 --set config.admin.token_file=/run/token
refuse "adminToken.secretName" --set adminToken.secretName=Not_A_Name
refuse "adminToken.key" --set adminToken.secretName=token --set adminToken.key=
# Load balancer settings on a Service that is not one would restrict nothing.
refuse "loadBalancerSourceRanges needs service.type LoadBalancer" --set service.type=NodePort \
    --set 'service.loadBalancerSourceRanges[0]=203.0.113.0/24'
refuse "loadBalancerClass needs service.type LoadBalancer" \
    --set service.loadBalancerClass=example.com/lb
refuse "service.nodePorts.proxy" --set service.type=NodePort --set service.nodePorts.proxy=70000
refuse "sessionAffinity" --set service.sessionAffinity=ClientIP
refuse "networkPolicy.adminFrom" --set networkPolicy.enabled=true \
    --set networkPolicy.adminFrom=everyone
refuse "networkPolicy.monitoringNamespace" --set networkPolicy.monitoringNamespace=Monitoring
refuse "rules and additionalRules are both empty" --set prometheusRule.enabled=true \
    --set-json 'prometheusRule.rules=[]'
refuse "additionalRules.0: expr is required" \
    --set-json 'prometheusRule.additionalRules=[{"alert":"X"}]'
refuse "additionalRules.0: Must validate one and only one schema" \
    --set-json 'prometheusRule.additionalRules=[{"alert":"X","record":"x","expr":"1"}]'
refuse "additionalRules.0.for" \
    --set-json 'prometheusRule.additionalRules=[{"alert":"X","expr":"1","for":"5 minutes"}]'
refuse "no listener on ports.proxy" --set 'config.listen[0]=0.0.0.0:8000'
refuse "no listener on ports.https" --set tls.secretName=cert --set 'config.listen[0]=0.0.0.0:8080'
refuse "tls.extraSecrets needs tls.secretName" --set 'tls.extraSecrets[0]=blog-tls'
refuse "lists tls.secretName (cert) again" --set tls.secretName=cert --set 'tls.extraSecrets[0]=cert'
refuse "tls.extraSecrets" --set tls.secretName=cert --set 'tls.extraSecrets[0]=Not_A_Name'
# Two sources for the shared state store.
refuse "set sharedState.redisSecretName or config.state, not both" \
    --set sharedState.redisSecretName=redis --set config.state.backend=memory
refuse "sharedState.timeout" --set sharedState.redisSecretName=redis --set sharedState.timeout=fast
refuse "need sharedState.redisSecretName" --set sharedState.tlsSecretName=redis-tls
refuse "tlsClientCertificate needs sharedState.tlsSecretName" \
    --set sharedState.redisSecretName=redis --set sharedState.tlsClientCertificate=true
refuse "uses nothing from it" --set sharedState.redisSecretName=redis \
    --set sharedState.tlsSecretName=redis-tls --set sharedState.tlsCaCertificate=false
refuse "must exceed" --set terminationGracePeriodSeconds=15
refuse "config.shutdown.grace" --set-string config.shutdown.grace=10
refuse "pullPolicy" --set image.pullPolicy=Sometimes
refuse "origins" --set config.origins=null
# A robots file named like the config would shadow it in the shared volume.
refuse "robotsFiles" --set-string 'robotsFiles.robotsguard\.yaml=x'
refuse "kubeVersion" --kube-version 1.29.0
# The decision service: in-cluster callers are not loopback, the chart writes config.decision,
# and a pod must serve something.
refuse "decision.enabled needs decision.trustedCallers" --set decision.enabled=true
refuse "config.decision is written by the chart" --set 'config.decision.listen[0]=0.0.0.0:8081'
refuse "the pods would serve nothing" --set proxy.enabled=false
refuse "tls.secretName needs proxy.enabled" --set proxy.enabled=false --set decision.enabled=true \
    --set 'decision.trustedCallers[0]=10.244.0.0/16' --set tls.secretName=cert
refuse "config.listen must be empty with proxy.enabled false" --set proxy.enabled=false \
    --set decision.enabled=true --set 'decision.trustedCallers[0]=10.244.0.0/16' \
    --set 'config.listen[0]=0.0.0.0:8080'
refuse "decision.onError" --set decision.onError=maybe
# Evidence: a key, somewhere to write, a claim every pod can mount, one source of the section.
refuse "evidence.enabled needs evidence.keySecret.secretName" --set evidence.enabled=true
refuse "evidence.enabled needs a volume for the records" --set evidence.enabled=true \
    --set evidence.keySecret.secretName=key --set evidence.volume.claim.create=false
refuse "existingClaim and evidence.volume.emptyDir, not both" --set evidence.enabled=true \
    --set evidence.keySecret.secretName=key --set evidence.volume.existingClaim=claim \
    --set evidence.volume.emptyDir=true
refuse "needs ReadWriteMany with more than one pod" --set evidence.enabled=true \
    --set evidence.keySecret.secretName=key --set 'evidence.volume.claim.accessModes[0]=ReadWriteOnce'
refuse "set evidence.enabled or config.evidence, not both" --set evidence.enabled=true \
    --set evidence.keySecret.secretName=key --set config.evidence.enabled=false
refuse "evidence.retention" --set evidence.retention=forever

# The config JSON Schema accepts every example config and each config the chart renders, and
# refuses its invalid samples; the chart's README is its generator's output.
"$python" "$root/scripts/check-config-schema.py" "${rendered_configs[@]}"
"$python" "$root/scripts/gen-chart-readme.py" --check

echo "validate-helm: ok" >&2
