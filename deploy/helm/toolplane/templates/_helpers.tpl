{{/* Full name of the release's objects: <release>-toolplane, trimmed to 63 characters. */}}
{{- define "toolplane.fullname" -}}
{{- printf "%s-toolplane" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "toolplane.labels" -}}
app.kubernetes.io/name: toolplane
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "edge"). */}}
{{- define "toolplane.selector" -}}
app.kubernetes.io/name: toolplane
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Image of one component: (dict "root" $ "repository" .Values.edge.repository). */}}
{{- define "toolplane.image" -}}
{{- printf "%s%s:%s" .root.Values.image.registry .repository (default .root.Chart.AppVersion .root.Values.image.tag) -}}
{{- end -}}

{{/* Name of the Secret holding admin-token and edge-token. */}}
{{- define "toolplane.secretName" -}}
{{- default (printf "%s-auth" (include "toolplane.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{/* The Redis URL edges use: in-chart Redis, an external one, or none. */}}
{{- define "toolplane.redisUrl" -}}
{{- if .Values.redis.enabled -}}
{{- printf "redis://%s-redis:6379" (include "toolplane.fullname" .) -}}
{{- else -}}
{{- .Values.redis.externalUrl -}}
{{- end -}}
{{- end -}}

{{/* Pod security shared by every Toolplane container: the images run as 65532 (distroless nonroot). */}}
{{- define "toolplane.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
  seccompProfile: { type: RuntimeDefault }
{{- end -}}

{{- define "toolplane.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: { drop: [ALL] }
{{- end -}}

{{/* An ingress rule: the `metrics` port, from networkPolicy.metricsPeers (default: this namespace). */}}
{{- define "toolplane.metricsPeers" -}}
- ports: [{ port: metrics }]
  from:
    {{- if .Values.networkPolicy.metricsPeers }}
    {{- toYaml .Values.networkPolicy.metricsPeers | nindent 4 }}
    {{- else }}
    - podSelector: {}
    {{- end }}
{{- end }}

{{/* OpenTelemetry: the OTLP endpoint every component exports spans to, when otel.endpoint is set. */}}
{{- define "toolplane.otelEnv" -}}
{{- with .Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- end }}

{{/* TLS between components: the scheme of their URLs. */}}
{{- define "toolplane.scheme" -}}
{{- if .Values.tls.secretName }}https{{ else }}http{{ end }}
{{- end }}

{{/* TLS: the Secret's volume and mount (tls.crt, tls.key, ca.crt at /etc/toolplane-tls). */}}
{{- define "toolplane.tlsVolume" -}}
{{- if .Values.tls.secretName }}
- name: tls
  secret: { secretName: {{ .Values.tls.secretName }} }
{{- end }}
{{- end }}

{{- define "toolplane.tlsMount" -}}
{{- if .Values.tls.secretName }}
- { name: tls, mountPath: /etc/toolplane-tls, readOnly: true }
{{- end }}
{{- end }}

{{/* TLS: what a component trusts and presents when it calls another one. */}}
{{- define "toolplane.tlsClientEnv" -}}
{{- if .Values.tls.secretName }}
- name: TOOLPLANE_TLS_CA_FILE
  value: /etc/toolplane-tls/ca.crt
- name: TOOLPLANE_TLS_CLIENT_CERT_FILE
  value: /etc/toolplane-tls/tls.crt
- name: TOOLPLANE_TLS_CLIENT_KEY_FILE
  value: /etc/toolplane-tls/tls.key
{{- end }}
{{- end }}
