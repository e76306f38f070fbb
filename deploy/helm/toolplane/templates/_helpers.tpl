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
# No component talks to the Kubernetes API: no service account token in any pod.
automountServiceAccountToken: false
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

{{/* The Host header values edges answer: the edge Service's in-cluster names, the ingress
hosts, the host of edge.oauth.resource, then edge.allowedHosts; as the TOML array the edge reads. */}}
{{- define "toolplane.allowedHosts" -}}
{{- $edge := printf "%s-edge" (include "toolplane.fullname" .) -}}
{{- $ns := .Release.Namespace -}}
{{- $hosts := list $edge (printf "%s.%s" $edge $ns) (printf "%s.%s.svc" $edge $ns) (printf "%s.%s.svc.cluster.local" $edge $ns) -}}
{{- if .Values.edge.ingress.enabled }}{{ $hosts = concat $hosts .Values.edge.ingress.hosts }}{{ end -}}
{{- with .Values.edge.oauth.resource }}{{ $hosts = append $hosts (urlParse .).host }}{{ end -}}
{{- $hosts = concat $hosts .Values.edge.allowedHosts | uniq -}}
{{- printf "[%s]" (join ", " $hosts) -}}
{{- end -}}

{{/* Egress every pod has: DNS, and networkPolicy.extraEgress. */}}
{{- define "toolplane.baseEgress" -}}
- ports: [{ port: 53, protocol: UDP }, { port: 53, protocol: TCP }]
{{- with .Values.networkPolicy.extraEgress }}
- to: {{- toYaml . | nindent 4 }}
{{- end }}
{{- end -}}

{{/* Egress to public addresses only: everything but loopback, private, shared, link-local
(cloud metadata) and other special-purpose ranges. */}}
{{- define "toolplane.publicEgress" -}}
- to:
    - ipBlock:
        cidr: 0.0.0.0/0
        except: [0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.0.0.0/24, 192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/3]
    - ipBlock:
        cidr: 2000::/3
        except: ["2001:db8::/32", "2002::/16", "2001::/32"]
{{- end -}}

{{/* Egress to one of the release's components, on its gRPC port: (dict "root" $ "component" "wiki"). */}}
{{- define "toolplane.egressTo" -}}
- to:
    - podSelector:
        matchLabels: {{- include "toolplane.selector" (dict "root" .root "component" .component) | nindent 10 }}
{{- end -}}
