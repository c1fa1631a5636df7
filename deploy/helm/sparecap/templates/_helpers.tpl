{{/*
The chart name, or nameOverride.
*/}}
{{- define "sparecap.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the release's objects: fullnameOverride, else the release
name, followed by the chart name unless the release name contains it.
Truncated to 63 characters, as the Service's name is a DNS label; the
names with a suffix ("-postgres", "-admin-token"...) are Secrets and
ConfigMaps, whose names may be longer.
*/}}
{{- define "sparecap.fullname" -}}
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

{{/*
The helm.sh/chart label: chart name and version.
*/}}
{{- define "sparecap.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The labels every object carries.
*/}}
{{- define "sparecap.labels" -}}
helm.sh/chart: {{ include "sparecap.chart" . }}
{{ include "sparecap.selectorLabels" . }}
app.kubernetes.io/version: {{ include "sparecap.imageTag" . | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/component: control-plane
app.kubernetes.io/part-of: sparecap
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The labels that select the release's pods (they never change on upgrade:
a Deployment's selector is immutable).
*/}}
{{- define "sparecap.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sparecap.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The image tag: image.tag, else the chart's appVersion.
*/}}
{{- define "sparecap.imageTag" -}}
{{- .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
The image reference: repository:tag, or repository@digest when a digest is
given.
*/}}
{{- define "sparecap.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (include "sparecap.imageTag" .) }}
{{- end }}
{{- end }}

{{/*
The ServiceAccount's name.
*/}}
{{- define "sparecap.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sparecap.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The Secret holding the PostgreSQL URL. Refuses to render when there is
none: sparecap replicas can only share a PostgreSQL database.
*/}}
{{- define "sparecap.postgresSecretName" -}}
{{- if .Values.postgres.existingSecret }}
{{- .Values.postgres.existingSecret }}
{{- else if .Values.postgres.url }}
{{- printf "%s-postgres" (include "sparecap.fullname" .) }}
{{- else }}
{{- fail "sparecap needs a PostgreSQL database: set postgres.url (e.g. --set postgres.url=postgres://user:pass@host:5432/sparecap) or postgres.existingSecret (a Secret whose key postgres.secretKey holds the URL). SQLite is for a single server and cannot be shared by replicas." }}
{{- end }}
{{- end }}

{{/*
The Secret holding the 32-byte secret key.
*/}}
{{- define "sparecap.secretKeySecretName" -}}
{{- if .Values.secretKey.existingSecret }}
{{- .Values.secretKey.existingSecret }}
{{- else }}
{{- printf "%s-secret-key" (include "sparecap.fullname" .) }}
{{- end }}
{{- end }}

{{/*
The Secret holding the admin token.
*/}}
{{- define "sparecap.adminTokenSecretName" -}}
{{- if .Values.adminToken.existingSecret }}
{{- .Values.adminToken.existingSecret }}
{{- else }}
{{- printf "%s-admin-token" (include "sparecap.fullname" .) }}
{{- end }}
{{- end }}
