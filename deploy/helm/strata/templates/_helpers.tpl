{{/* The StatefulSet's name: its pods are <fullname>-<ordinal>. */}}
{{- define "strata.fullname" -}}
{{- if eq .Release.Name .Chart.Name -}}
{{ .Release.Name }}
{{- else -}}
{{ .Release.Name }}-{{ .Chart.Name }}
{{- end -}}
{{- end -}}

{{- define "strata.headless" -}}
{{ include "strata.fullname" . }}-headless
{{- end -}}

{{- define "strata.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "strata.labels" -}}
{{ include "strata.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The Kafka listener's security protocol, from tls.enabled and sasl.enabled. */}}
{{- define "strata.protocol" -}}
{{- if and .Values.tls.enabled .Values.sasl.enabled -}}
SASL_SSL
{{- else if .Values.tls.enabled -}}
SSL
{{- else if .Values.sasl.enabled -}}
SASL_PLAINTEXT
{{- else -}}
PLAINTEXT
{{- end -}}
{{- end -}}
