{{/* The release's resource names and labels. */}}
{{- define "signet.name" -}}
{{- .Release.Name | trunc 53 | trimSuffix "-" -}}
{{- end -}}

{{- define "signet.labels" -}}
app.kubernetes.io/name: signet
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "signet.selector" -}}
app.kubernetes.io/name: signet
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The image, pinned by digest when one is given. */}}
{{- define "signet.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* What every signet container runs as: uid 10001 (the image's user), nothing else. */}}
{{- define "signet.containerSecurity" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
