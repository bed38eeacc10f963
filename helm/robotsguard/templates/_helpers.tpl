{{/*
Names and labels, following the usual app.kubernetes.io conventions.
*/}}
{{- define "robotsguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "robotsguard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Names with a suffix stay within 63 characters by trimming the base first. */}}
{{- define "robotsguard.adminServiceName" -}}
{{- printf "%s-admin" (include "robotsguard.fullname" . | trunc 57 | trimSuffix "-") -}}
{{- end -}}

{{- define "robotsguard.decisionServiceName" -}}
{{- printf "%s-decision" (include "robotsguard.fullname" . | trunc 54 | trimSuffix "-") -}}
{{- end -}}

{{- define "robotsguard.robotsConfigMapName" -}}
{{- printf "%s-robots" (include "robotsguard.fullname" . | trunc 56 | trimSuffix "-") -}}
{{- end -}}

{{- define "robotsguard.dashboardName" -}}
{{- printf "%s-dashboard" (include "robotsguard.fullname" . | trunc 53 | trimSuffix "-") -}}
{{- end -}}

{{/*
Where the admin token Secret's key is projected, relative to the config
file (as tls/tls.crt is), inside the config volume.
*/}}
{{- define "robotsguard.adminTokenFile" -}}
admin/token
{{- end -}}

{{/*
Where the bouncer keys Secret's key is projected, beside the admin token.
*/}}
{{- define "robotsguard.bouncerKeysFile" -}}
admin/bouncer-keys
{{- end -}}

{{/*
Where the evidence signing key's Secret key is projected, relative to the
config file, inside the config volume.
*/}}
{{- define "robotsguard.evidenceKeyFile" -}}
evidence/signing-key
{{- end -}}

{{/* Where the evidence volume is mounted: evidence.dir. */}}
{{- define "robotsguard.evidenceDir" -}}
/var/lib/robotsguard/evidence
{{- end -}}

{{- define "robotsguard.evidenceClaimName" -}}
{{- printf "%s-evidence" (include "robotsguard.fullname" . | trunc 54 | trimSuffix "-") -}}
{{- end -}}

{{/*
The claim the evidence volume mounts: evidence.volume.existingClaim, else the
chart's own; empty with evidence.volume.emptyDir. Fails on a choice that
would leave the records nowhere, or on a claim more than one pod could not
mount.
*/}}
{{- define "robotsguard.evidenceClaim" -}}
{{- $volume := .Values.evidence.volume -}}
{{- if and $volume.existingClaim $volume.emptyDir -}}
{{- fail "robotsguard chart: evidence.volume.existingClaim and evidence.volume.emptyDir, not both" -}}
{{- end -}}
{{- if $volume.existingClaim -}}
{{- $volume.existingClaim -}}
{{- else if not $volume.emptyDir -}}
{{- if not $volume.claim.create -}}
{{- fail "robotsguard chart: evidence.enabled needs a volume for the records: evidence.volume.existingClaim, evidence.volume.claim.create, or evidence.volume.emptyDir (records lost with the pod)" -}}
{{- end -}}
{{- $pods := or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1) -}}
{{- if and $pods (not (has "ReadWriteMany" $volume.claim.accessModes)) -}}
{{- fail "robotsguard chart: evidence.volume.claim.accessModes needs ReadWriteMany with more than one pod (replicaCount above 1 or autoscaling): each pod mounts the claim and writes its own chain; or set replicaCount: 1, or name an evidence.volume.existingClaim" -}}
{{- end -}}
{{- include "robotsguard.evidenceClaimName" . -}}
{{- end -}}
{{- end -}}

{{- define "robotsguard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "robotsguard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "robotsguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "robotsguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "robotsguard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "robotsguard.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "robotsguard.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
Whole seconds in a robotsguard duration ("250ms", "10s", "1m30s", "1d"),
rounded up. Fails on anything else, because a grace period the chart cannot
read is a termination budget it cannot check.
*/}}
{{- define "robotsguard.durationSeconds" -}}
{{- $text := toString . -}}
{{- $parts := regexFindAll "[0-9]+(ms|d|h|m|s)" $text -1 -}}
{{- if or (not $parts) (ne (join "" $parts) $text) -}}
{{- fail (printf "robotsguard chart: cannot read the duration %q (write e.g. 10s or 1m30s)" $text) -}}
{{- end -}}
{{- $millis := 0 -}}
{{- range $parts -}}
{{- $n := regexFind "^[0-9]+" . | int -}}
{{- $unit := regexFind "[a-z]+$" . -}}
{{- $scale := get (dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000 "d" 86400000) $unit -}}
{{- $millis = add $millis (mul $n $scale) -}}
{{- end -}}
{{- div (add $millis 999) 1000 -}}
{{- end -}}

{{/* The port of "HOST:PORT" (IPv6 hosts in brackets). */}}
{{- define "robotsguard.portOf" -}}
{{- regexFind "[0-9]+$" (toString .) -}}
{{- end -}}

{{/* The grace period robotsguard will use, in seconds. */}}
{{- define "robotsguard.graceSeconds" -}}
{{- $shutdown := .Values.config.shutdown | default dict -}}
{{- if hasKey $shutdown "grace" -}}
{{- include "robotsguard.durationSeconds" $shutdown.grace -}}
{{- else -}}
{{- int .Values.drain.graceSeconds -}}
{{- end -}}
{{- end -}}

{{/*
Pod termination budget: preStop sleep + robotsguard's drain + slack for the
process to exit. An explicit value shorter than that would SIGKILL pods with
requests still in flight, so it is refused.
*/}}
{{- define "robotsguard.terminationGracePeriodSeconds" -}}
{{- $needed := add (int .Values.drain.preStopSeconds) (include "robotsguard.graceSeconds" . | int) -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds -}}
{{- add $needed 5 -}}
{{- else -}}
{{- $given := int .Values.terminationGracePeriodSeconds -}}
{{- if le $given $needed -}}
{{- fail (printf "robotsguard chart: terminationGracePeriodSeconds (%d) must exceed drain.preStopSeconds + the shutdown grace (%d)" $given $needed) -}}
{{- end -}}
{{- $given -}}
{{- end -}}
{{- end -}}

{{/*
The config file as mounted: values.config with listen, admin and
shutdown.grace filled in from the chart's values when absent, and checked
against the ports the pod exposes when present. admin is always a mapping
whose hosts list the admin Service's DNS names and adminService.hosts; with
adminToken.secretName its token_file is the projected Secret key.
*/}}
{{- define "robotsguard.config" -}}
{{- if and .Values.tls.extraSecrets (not .Values.tls.secretName) -}}
{{- fail "robotsguard chart: tls.extraSecrets needs tls.secretName (its certificate is the listener's default)" -}}
{{- end -}}
{{- if has .Values.tls.secretName (.Values.tls.extraSecrets | default list) -}}
{{- fail (printf "robotsguard chart: tls.extraSecrets lists tls.secretName (%s) again" .Values.tls.secretName) -}}
{{- end -}}
{{- $config := deepCopy (.Values.config | default dict) -}}
{{- if hasKey $config "decision" -}}
{{- fail "robotsguard chart: config.decision is written by the chart; set decision.enabled, decision.trustedCallers, decision.timeout and decision.onError instead" -}}
{{- end -}}
{{- if .Values.decision.enabled -}}
{{- /* In-cluster callers are pod addresses, never loopback, so the default (loopback only)
would answer every caller 403. */ -}}
{{- if not .Values.decision.trustedCallers -}}
{{- fail "robotsguard chart: decision.enabled needs decision.trustedCallers: name the ingress controller's pod CIDR (e.g. 10.244.0.0/16); in-cluster callers are not loopback" -}}
{{- end -}}
{{- $decision := dict "listen" (list (printf "%s:%d" .Values.bindAddress (int .Values.ports.decision))) "trusted_callers" .Values.decision.trustedCallers "timeout" .Values.decision.timeout "on_error" .Values.decision.onError -}}
{{- $_ := set $config "decision" $decision -}}
{{- end -}}
{{- if not .Values.proxy.enabled -}}
{{- if not .Values.decision.enabled -}}
{{- fail "robotsguard chart: proxy.enabled is false and decision.enabled is not true: the pods would serve nothing" -}}
{{- end -}}
{{- if .Values.tls.secretName -}}
{{- fail "robotsguard chart: tls.secretName needs proxy.enabled (TLS is the proxy's listener)" -}}
{{- end -}}
{{- if and (hasKey $config "listen") $config.listen -}}
{{- fail "robotsguard chart: config.listen must be empty with proxy.enabled false" -}}
{{- end -}}
{{- $_ := set $config "listen" list -}}
{{- end -}}
{{- with .Values.sharedState.redisSecretName -}}
{{- if hasKey $config "state" -}}
{{- fail "robotsguard chart: set sharedState.redisSecretName or config.state, not both; with sharedState the chart mounts the Secret and writes state itself" -}}
{{- end -}}
{{- $redis := dict "url_file" "state/redis-url" "prefix" $.Values.sharedState.prefix "timeout" $.Values.sharedState.timeout -}}
{{- with $.Values.sharedState.tlsSecretName -}}
{{- if not (or $.Values.sharedState.tlsCaCertificate $.Values.sharedState.tlsClientCertificate) -}}
{{- fail "robotsguard chart: sharedState.tlsSecretName with neither tlsCaCertificate nor tlsClientCertificate uses nothing from it" -}}
{{- end -}}
{{- $tls := dict -}}
{{- if $.Values.sharedState.tlsCaCertificate -}}
{{- $_ := set $tls "ca" "state/redis-tls/ca.crt" -}}
{{- end -}}
{{- if $.Values.sharedState.tlsClientCertificate -}}
{{- $_ := set $tls "client_cert" "state/redis-tls/tls.crt" -}}
{{- $_ := set $tls "client_key" "state/redis-tls/tls.key" -}}
{{- end -}}
{{- $_ := set $redis "tls" $tls -}}
{{- end -}}
{{- $_ := set $config "state" (dict "backend" "redis" "redis" $redis) -}}
{{- end -}}
{{- if and (or .Values.sharedState.tlsSecretName .Values.sharedState.tlsClientCertificate) (not .Values.sharedState.redisSecretName) -}}
{{- fail "robotsguard chart: sharedState.tlsSecretName and tlsClientCertificate need sharedState.redisSecretName" -}}
{{- end -}}
{{- if and .Values.sharedState.tlsClientCertificate (not .Values.sharedState.tlsSecretName) -}}
{{- fail "robotsguard chart: sharedState.tlsClientCertificate needs sharedState.tlsSecretName (the Secret with tls.crt and tls.key)" -}}
{{- end -}}
{{- $bind := .Values.bindAddress -}}
{{- $proxyPort := int .Values.ports.proxy -}}
{{- $httpsPort := int .Values.ports.https -}}
{{- $adminPort := int .Values.ports.admin -}}
{{- if not .Values.proxy.enabled -}}
{{- /* listen: [] was set above: the decision service alone. */ -}}
{{- else if not (hasKey $config "listen") -}}
{{- $listen := list (printf "%s:%d" $bind $proxyPort) -}}
{{- if .Values.tls.secretName -}}
{{- $certs := list (dict "cert" "tls/tls.crt" "key" "tls/tls.key") -}}
{{- range .Values.tls.extraSecrets -}}
{{- $certs = append $certs (dict "cert" (printf "tls/%s/tls.crt" .) "key" (printf "tls/%s/tls.key" .)) -}}
{{- end -}}
{{- $tls := dict "certs" $certs "http2" .Values.tls.http2 -}}
{{- $listen = append $listen (dict "address" (printf "%s:%d" $bind $httpsPort) "tls" $tls) -}}
{{- end -}}
{{- $_ := set $config "listen" $listen -}}
{{- else -}}
{{- $ports := list -}}
{{- $entries := $config.listen -}}
{{- if not (kindIs "slice" $entries) -}}
{{- $entries = list $entries -}}
{{- end -}}
{{- range $entries -}}
{{- $address := . -}}
{{- if kindIs "map" . -}}
{{- $address = .address -}}
{{- end -}}
{{- $ports = append $ports (include "robotsguard.portOf" $address) -}}
{{- end -}}
{{- if not (has (toString $proxyPort) $ports) -}}
{{- fail (printf "robotsguard chart: config.listen has no listener on ports.proxy (%d); the Service and container port point there" $proxyPort) -}}
{{- end -}}
{{- if and .Values.tls.secretName (not (has (toString $httpsPort) $ports)) -}}
{{- fail (printf "robotsguard chart: tls.secretName is set but config.listen has no listener on ports.https (%d)" $httpsPort) -}}
{{- end -}}
{{- end -}}
{{- $tokenFile := "" -}}
{{- if .Values.adminToken.secretName -}}
{{- $tokenFile = include "robotsguard.adminTokenFile" . -}}
{{- end -}}
{{- /* The names the admin listener answers to besides its addresses (any other Host gets
421): the admin Service's DNS names, so in-cluster clients may call it by name, and
adminService.hosts. Probes and Prometheus send the pod IP, which a wildcard listener accepts. */ -}}
{{- $service := include "robotsguard.adminServiceName" . -}}
{{- $namespace := .Release.Namespace -}}
{{- $adminHosts := list $service (printf "%s.%s" $service $namespace) (printf "%s.%s.svc" $service $namespace) (printf "%s.%s.svc.%s" $service $namespace .Values.adminService.clusterDomain) -}}
{{- range .Values.adminService.hosts -}}
{{- $adminHosts = append $adminHosts (lower .) -}}
{{- end -}}
{{- $keysFile := "" -}}
{{- if .Values.bouncerKeys.secretName -}}
{{- $keysFile = include "robotsguard.bouncerKeysFile" . -}}
{{- end -}}
{{- if not (hasKey $config "admin") -}}
{{- $address := printf "%s:%d" $bind $adminPort -}}
{{- if $tokenFile -}}
{{- $_ := set $config "admin" (dict "address" $address "token_file" $tokenFile "hosts" $adminHosts) -}}
{{- else -}}
{{- $_ := set $config "admin" (dict "address" $address "hosts" $adminHosts) -}}
{{- end -}}
{{- if $keysFile -}}
{{- $_ := set $config.admin "bouncer_keys_file" $keysFile -}}
{{- end -}}
{{- else -}}
{{- if and $keysFile (not (kindIs "map" $config.admin)) -}}
{{- fail "robotsguard chart: bouncerKeys.secretName needs config.admin written as a mapping ({address: ...}) or left out" -}}
{{- end -}}
{{- if and $keysFile (kindIs "map" $config.admin) -}}
{{- if hasKey $config.admin "bouncer_keys_file" -}}
{{- fail "robotsguard chart: set bouncerKeys.secretName or config.admin.bouncer_keys_file, not both; with bouncerKeys the chart mounts the Secret and writes bouncer_keys_file itself" -}}
{{- end -}}
{{- $_ := set $config.admin "bouncer_keys_file" $keysFile -}}
{{- end -}}
{{- /* admin is "IP:PORT" or {address, token_file}; check the address either way. */ -}}
{{- $key := "config.admin" -}}
{{- $admin := toString $config.admin -}}
{{- if kindIs "map" $config.admin -}}
{{- $key = "config.admin.address" -}}
{{- $admin = toString ($config.admin.address | default "") -}}
{{- end -}}
{{- if ne (include "robotsguard.portOf" $admin) (toString $adminPort) -}}
{{- fail (printf "robotsguard chart: %s (%s) must use ports.admin (%d); the probes and the ServiceMonitor point there" $key $admin $adminPort) -}}
{{- end -}}
{{- $host := regexReplaceAll ":[0-9]+$" $admin "" -}}
{{- if or (hasPrefix "127." $host) (eq $host "[::1]") (eq $host "localhost") -}}
{{- fail (printf "robotsguard chart: %s (%s) listens on loopback, where the kubelet's probes cannot reach it; use %s:%d" $key $admin $bind $adminPort) -}}
{{- end -}}
{{- if kindIs "map" $config.admin -}}
{{- if hasKey $config.admin "token_file" -}}
{{- /* Two token sources would leave the ServiceMonitor sending one while robotsguard reads the other. */ -}}
{{- if $tokenFile -}}
{{- fail "robotsguard chart: set adminToken.secretName or config.admin.token_file, not both; with adminToken the chart mounts the Secret and writes token_file itself" -}}
{{- end -}}
{{- if .Values.serviceMonitor.enabled -}}
{{- fail "robotsguard chart: config.admin.token_file is set without adminToken.secretName, so the ServiceMonitor would scrape /metrics without the token (401); name the token's Secret in adminToken instead" -}}
{{- end -}}
{{- else if $tokenFile -}}
{{- $_ := set $config.admin "token_file" $tokenFile -}}
{{- end -}}
{{- /* The chart's names join any the config lists. */ -}}
{{- $hosts := $config.admin.hosts | default list -}}
{{- range $adminHosts -}}
{{- if not (has . $hosts) -}}
{{- $hosts = append $hosts . -}}
{{- end -}}
{{- end -}}
{{- $_ := set $config.admin "hosts" $hosts -}}
{{- else if $tokenFile -}}
{{- $_ := set $config "admin" (dict "address" $admin "token_file" $tokenFile "hosts" $adminHosts) -}}
{{- else -}}
{{- $_ := set $config "admin" (dict "address" $admin "hosts" $adminHosts) -}}
{{- end -}}
{{- end -}}
{{- if .Values.evidence.enabled -}}
{{- if hasKey $config "evidence" -}}
{{- fail "robotsguard chart: set evidence.enabled or config.evidence, not both; with evidence.enabled the chart mounts the key and the volume and writes evidence itself" -}}
{{- end -}}
{{- if not .Values.evidence.keySecret.secretName -}}
{{- fail "robotsguard chart: evidence.enabled needs evidence.keySecret.secretName: the Secret holding the Ed25519 signing key (openssl genpkey -algorithm ed25519)" -}}
{{- end -}}
{{- $_ := include "robotsguard.evidenceClaim" . -}}
{{- $evidence := dict "enabled" true "key_file" (include "robotsguard.evidenceKeyFile" .) "dir" (include "robotsguard.evidenceDir" .) "retention" .Values.evidence.retention "events" .Values.evidence.events "max_file_size" .Values.evidence.maxFileSize "queue" (int .Values.evidence.queue) -}}
{{- $_ := set $config "evidence" $evidence -}}
{{- end -}}
{{- $shutdown := $config.shutdown | default dict -}}
{{- if not (hasKey $shutdown "grace") -}}
{{- $_ := set $shutdown "grace" (printf "%ds" (int .Values.drain.graceSeconds)) -}}
{{- $_ := set $config "shutdown" $shutdown -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}
