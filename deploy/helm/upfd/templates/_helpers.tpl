{{/* Names and labels. */}}
{{- define "upfd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "upfd.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "upfd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "upfd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "upfd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "upfd.labels" -}}
helm.sh/chart: {{ include "upfd.chart" . }}
{{ include "upfd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: upf
{{- end }}

{{/* The NetworkAttachmentDefinition's name of network $n ("n3", "n4", "n6"). */}}
{{- define "upfd.netName" -}}
{{- printf "%s-%s" (include "upfd.fullname" .root) .n | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* An address without its prefix length: "10.0.0.1/24" -> "10.0.0.1". */}}
{{- define "upfd.addr" -}}
{{- regexReplaceAll "/.*$" . "" }}
{{- end }}

{{/* The CNI configuration (JSON) of network $n. */}}
{{- define "upfd.cniConfig" -}}
{{- $net := index .root.Values.networks .n }}
{{- if $net.rawConfig }}
{{- $net.rawConfig }}
{{- else }}
{{- $ipam := $net.ipam }}
{{- if not $ipam }}
{{- $ipam = dict "type" "static" "addresses" (list (dict "address" $net.address)) }}
{{- if $net.routes }}
{{- $_ := set $ipam "routes" $net.routes }}
{{- end }}
{{- end }}
{{- $cfg := dict "cniVersion" "0.3.1" "name" (include "upfd.netName" .) "type" $net.cni "ipam" $ipam }}
{{- if or (eq $net.cni "macvlan") (eq $net.cni "ipvlan") }}
{{- $_ := set $cfg "master" (required (printf "networks.%s.master: the node's parent interface" .n) $net.master) }}
{{- $_ := set $cfg "mode" $net.mode }}
{{- else if eq $net.cni "host-device" }}
{{- $_ := set $cfg "device" (required (printf "networks.%s.device: the node's interface to move into the pod" .n) $net.device) }}
{{- else }}
{{- fail (printf "networks.%s.cni: %q is none of macvlan, ipvlan, host-device (or give rawConfig)" .n $net.cni) }}
{{- end }}
{{- toJson $cfg }}
{{- end }}
{{- end }}

{{/* upfd.yaml: the keys derived from the other values, then .Values.config over them. */}}
{{- define "upfd.config" -}}
{{- $v := .Values }}
{{- $base := dict }}
{{- if $v.networks.n4.enabled }}
{{- $n4 := include "upfd.addr" $v.networks.n4.address }}
{{- $_ := set $base "node_id" $n4 }}
{{- $_ := set $base "n4" (dict "address" $n4) }}
{{- end }}
{{- if $v.networks.n3.enabled }}
{{- $n3 := include "upfd.addr" $v.networks.n3.address }}
{{- $_ := set $base "gtpu" (dict "n3" (dict (ternary "ipv6" "ipv4" (contains ":" $n3)) $n3)) }}
{{- end }}
{{- $mode := "none" }}
{{- if and $v.config.datapath $v.config.datapath.mode }}
{{- $mode = $v.config.datapath.mode }}
{{- end }}
{{- if eq $mode "xdp" }}
{{- $dp := dict }}
{{- if $v.networks.n3.enabled }}{{ $_ := set $dp "n3_interface" $v.networks.n3.interface }}{{ end }}
{{- if $v.networks.n6.enabled }}{{ $_ := set $dp "n6_interface" $v.networks.n6.interface }}{{ end }}
{{- $_ := set $base "datapath" $dp }}
{{- end }}
{{- $api := dict "listen" (printf "0.0.0.0:%v" $v.api.port) "probe_address" (printf "0.0.0.0:%v" $v.api.probePort) "token_file" (include "upfd.tokenFile" .) }}
{{- if $v.api.tls.existingSecret }}
{{- $_ := set $api "tls_cert_file" "/etc/upfd/api/tls.crt" }}
{{- $_ := set $api "tls_key_file" "/etc/upfd/api/tls.key" }}
{{- end }}
{{- $_ := set $base "api" $api }}
{{- $_ := set $base "state" (dict "directory" "/var/lib/upfd") }}
{{- $cfg := mergeOverwrite $base (deepCopy $v.config) }}
{{- if not $cfg.node_id }}{{ fail "config.node_id: set it (or enable networks.n4 with an address)" }}{{ end }}
{{- if or (not $cfg.n4) (not $cfg.n4.address) }}{{ fail "config.n4.address: set it (or enable networks.n4 with an address)" }}{{ end }}
{{- if or (not $cfg.gtpu) (not $cfg.gtpu.n3) }}{{ fail "config.gtpu.n3: set it (or enable networks.n3 with an address)" }}{{ end }}
{{- if not (compact ($cfg.n4.allowed_peers | default list)) }}{{ fail "config.n4.allowed_peers: name the SMFs admitted to N4 as source prefixes (e.g. --set 'config.n4.allowed_peers={198.51.100.0/24}'): the chart does not render an N4 open to whoever reaches it" }}{{ end }}
{{- toYaml $cfg }}
{{- end }}

{{/* The containers' securityContext: root with the capabilities listed, or privileged. */}}
{{- define "upfd.securityContext" -}}
{{- $sc := .Values.securityContext -}}
runAsUser: 0
readOnlyRootFilesystem: {{ $sc.readOnlyRootFilesystem }}
{{- if $sc.privileged }}
privileged: true
{{- else }}
privileged: false
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
  add:
    {{- toYaml $sc.capabilities | nindent 4 }}
{{- end }}
{{- end }}

{{/* Where the API's bearer token is mounted (api.token_file). */}}
{{- define "upfd.tokenFile" -}}
/etc/upfd/api/token
{{- end }}

{{/* The Secret holding the API's bearer token, and its key. */}}
{{- define "upfd.tokenSecret" -}}
{{- .Values.api.token.existingSecret | default (printf "%s-api-token" (include "upfd.fullname" .)) }}
{{- end }}

{{- define "upfd.tokenKey" -}}
{{- ternary .Values.api.token.existingSecretKey "token" (ne .Values.api.token.existingSecret "") }}
{{- end }}

{{/* The ports upfd.yaml gives (whatever set them), as YAML: api, probe, n4. */}}
{{- define "upfd.ports" -}}
{{- $cfg := include "upfd.config" . | fromYaml }}
{{- if or (not $cfg.api) (not $cfg.api.listen) }}{{ fail "config.api.listen: the subscriber API's address (api.port)" }}{{ end }}
{{- if not $cfg.api.probe_address }}{{ fail "config.api.probe_address: the kubelet's probes and Prometheus need upfd's plain listener (api.probePort)" }}{{ end }}
{{- if ne (toString $cfg.api.token_file) (include "upfd.tokenFile" .) }}{{ fail (printf "config.api.token_file: the chart mounts the API's token (api.token) at %s; leave it unset" (include "upfd.tokenFile" .)) }}{{ end }}
api: {{ regexReplaceAll "^.*:" (toString $cfg.api.listen) "" | int }}
probe: {{ regexReplaceAll "^.*:" (toString $cfg.api.probe_address) "" | int }}
n4: {{ $cfg.n4.port | default 8805 | int }}
{{- end }}
