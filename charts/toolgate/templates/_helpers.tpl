{{/* The chart's name (labels). */}}
{{- define "toolgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The objects' names: <release>-controller (toolgate-controller for the release `toolgate`, the names
of deploy/), or fullnameOverride. The Lease of --leader-elect has this name too. */}}
{{- define "toolgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-controller" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "toolgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "toolgate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "toolgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "toolgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "toolgate.labels" -}}
{{ include "toolgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: toolgate
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* repository@digest, else repository:tag (tag default: the chart's appVersion). */}}
{{- define "toolgate.imageRef" -}}
{{- $img := index . 0 -}}{{- $root := index . 1 -}}
{{- if $img.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" $img.digest) -}}
{{- fail (printf "image digest %q: expected sha256:<64 hex digits>" $img.digest) -}}
{{- end -}}
{{- printf "%s@%s" $img.repository $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $img.repository (default $root.Chart.AppVersion $img.tag) -}}
{{- end -}}
{{- end -}}

{{- define "toolgate.controllerImage" -}}
{{- include "toolgate.imageRef" (list .Values.image .) -}}
{{- end -}}

{{/* The WasmPlugin url: filter.url, else the filter image of this release, pinned by its digest. */}}
{{- define "toolgate.filterUrl" -}}
{{- if .Values.filter.url -}}
{{- .Values.filter.url -}}
{{- else -}}
{{- printf "oci://%s" (include "toolgate.imageRef" (list .Values.filter .)) -}}
{{- end -}}
{{- end -}}
