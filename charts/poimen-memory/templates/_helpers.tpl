{{/*
Standard helpers (qdrant-helm style): names are truncated to 63 characters, the DNS label limit.
*/}}

{{/* Chart name, or nameOverride. */}}
{{- define "poimen-memory.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: release-chart, or the release name when it already contains the chart name. */}}
{{- define "poimen-memory.fullname" -}}
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

{{/* Chart name and version, for the helm.sh/chart label. */}}
{{- define "poimen-memory.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Common labels. */}}
{{- define "poimen-memory.labels" -}}
helm.sh/chart: {{ include "poimen-memory.chart" . }}
{{ include "poimen-memory.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: poimen-memory
{{- end }}

{{/* Selector labels: stable across upgrades (a Deployment's selector is immutable). */}}
{{- define "poimen-memory.selectorLabels" -}}
app.kubernetes.io/name: {{ include "poimen-memory.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Selector of the server pods. The component label keeps the migrations Job and the helm test pod (which
share the release labels) out of the Service, the PDB, the HPA's pod metrics and the NetworkPolicy.
*/}}
{{- define "poimen-memory.serverSelectorLabels" -}}
{{ include "poimen-memory.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end }}

{{/* Selector of the short-lived pods (migrations Job, helm test), for their NetworkPolicy. */}}
{{- define "poimen-memory.auxSelectorLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
poimen-memory/aux-pod: "true"
{{- end }}

{{/* ServiceAccount name. */}}
{{- define "poimen-memory.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "poimen-memory.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Secret holding DATABASE_URL, OpenSearch credentials and the JWT key. */}}
{{- define "poimen-memory.secretName" -}}
{{- default (include "poimen-memory.fullname" .) .Values.existingSecret }}
{{- end }}

{{/* Image reference: repository@digest when a digest is set, else repository:tag (tag defaults to appVersion). */}}
{{- define "poimen-memory.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Where the flags ConfigMap is mounted, and the file the app watches (POIMEN_FLAGS_FILE). */}}
{{- define "poimen-memory.flagsDir" -}}/etc/poimen/flags{{- end }}
{{- define "poimen-memory.flagsFile" -}}{{ include "poimen-memory.flagsDir" . }}/flags.yaml{{- end }}
{{- define "poimen-memory.vocabularyDir" -}}/etc/poimen/vocabulary{{- end }}
{{- /* "true" when the release renders a vocabulary file: entries listed, or mode replace (an empty table is a choice). */ -}}
{{- define "poimen-memory.vocabularyEnabled" -}}
{{- with .Values.queryVocabulary -}}
{{- if or .abbreviations .entities (eq .mode "replace") }}true{{ end -}}
{{- end -}}
{{- end }}

{{/*
Where PostgreSQL comes from:
  cnpg      postgresql.enabled: the CloudNativePG Cluster of this release
  external  a DATABASE_URL from existingSecret (unless embeddedDatabase) or secret.databaseUrl
  embedded  anything else (the defaults): PostgreSQL and the BM25 index inside the one pod, on /data
*/}}
{{- define "poimen-memory.databaseMode" -}}
{{- if .Values.postgresql.enabled -}}
cnpg
{{- else if or (and .Values.existingSecret (not .Values.embeddedDatabase)) .Values.secret.databaseUrl -}}
external
{{- else -}}
embedded
{{- end -}}
{{- end }}

{{/*
When the migrations Job (and the Secret and NetworkPolicy it needs) runs. Before the pods on upgrade, and
on install with a database of the operator's own: it exists, and may hold an older schema (a reinstall, a
restore), which the server refuses at start, so after the pods (with `--wait`) it never would. After the
release's objects on install with the bundled CloudNativePG Cluster: the database exists only then, fresh,
and the server starts on a database with no schema.
*/}}
{{- define "poimen-memory.migrationHooks" -}}
{{- if eq (include "poimen-memory.databaseMode" .) "cnpg" -}}
post-install,pre-upgrade
{{- else -}}
pre-install,pre-upgrade
{{- end -}}
{{- end }}

{{/* True (non-empty) when the service talks to a shared PostgreSQL (DATABASE_URL required, migrations Job rendered). */}}
{{- define "poimen-memory.externalDatabase" -}}
{{- if ne (include "poimen-memory.databaseMode" .) "embedded" }}true{{- end }}
{{- end }}

{{/*
Name of the CloudNativePG Cluster, computed as the cluster chart computes it ("cluster.fullname", where the
chart's name is the alias postgresql). CloudNativePG then names what it creates at run time after it
(documented naming convention): the `<cluster>-rw` Service (primary, read-write) and the `<cluster>-app`
Secret (application user: username, password, dbname, host, port, uri).
*/}}
{{- define "poimen-memory.postgresql.clusterName" -}}
{{- $values := .Values.postgresql }}
{{- if $values.fullnameOverride }}
{{- $values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default "postgresql" $values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Namespace of the Cluster (the cluster chart's namespaceOverride, else the release namespace). */}}
{{- define "poimen-memory.postgresql.namespace" -}}
{{- default .Release.Namespace .Values.postgresql.namespaceOverride }}
{{- end }}

{{/* The Secret CloudNativePG generates for the application user, and the Service of the primary. */}}
{{- define "poimen-memory.postgresql.appSecret" -}}
{{- include "poimen-memory.postgresql.clusterName" . }}-app
{{- end }}
{{- define "poimen-memory.postgresql.rwService" -}}
{{- include "poimen-memory.postgresql.clusterName" . }}-rw
{{- end }}

{{/* The bundled OpenSearch's client Service, computed as the opensearch chart computes "opensearch.serviceName". */}}
{{- define "poimen-memory.opensearch.serviceName" -}}
{{- $values := .Values.opensearch }}
{{- $nodeGroup := default "master" $values.nodeGroup }}
{{- $clusterName := default "opensearch-cluster" $values.clusterName }}
{{- if eq $nodeGroup "master" }}
{{- if $values.masterService }}
{{- $values.masterService }}
{{- else if $values.fullnameOverride }}
{{- $values.fullnameOverride }}
{{- else }}
{{- default $clusterName $values.nameOverride }}-master
{{- end }}
{{- else if $values.fullnameOverride }}
{{- $values.fullnameOverride }}
{{- else }}
{{- default $clusterName $values.nameOverride }}-{{ $nodeGroup }}
{{- end }}
{{- end }}

{{/* OPENSEARCH_URL of the bundled OpenSearch: its Service, protocol and HTTP port. */}}
{{- define "poimen-memory.opensearch.url" -}}
{{- printf "%s://%s.%s.svc:%v" (default "https" .Values.opensearch.protocol) (include "poimen-memory.opensearch.serviceName" .) .Release.Namespace (default 9200 .Values.opensearch.httpPort) }}
{{- end }}

{{/* True (non-empty) when the service has an OpenSearch: bundled, config.OPENSEARCH_URL or an extraEnv. */}}
{{- define "poimen-memory.hasOpensearch" -}}
{{- $fromExtraEnv := false }}
{{- range .Values.extraEnv }}{{ if eq .name "OPENSEARCH_URL" }}{{ $fromExtraEnv = true }}{{ end }}{{ end }}
{{- if or .Values.opensearch.enabled .Values.config.OPENSEARCH_URL $fromExtraEnv }}true{{- end }}
{{- end }}

{{/*
Renders nothing, or stops the render with what to set. Included by the Deployment, so every install,
upgrade and `helm template` goes through it.
*/}}
{{- define "poimen-memory.validate" -}}
{{- $mode := include "poimen-memory.databaseMode" . }}
{{- if and (eq $mode "embedded") (or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1)) }}
{{- fail (printf "the embedded database (no external database configured: postgresql.enabled is false, existingSecret is unset or embeddedDatabase is true, secret.databaseUrl is empty) runs inside one pod, so replicaCount=%v / autoscaling.enabled=%v cannot work: set replicaCount=1 and autoscaling.enabled=false, or give the pods a shared database: postgresql.enabled=true (CloudNativePG, with opensearch.enabled=true; see values-quickstart.yaml) or existingSecret with DATABASE_URL plus config.OPENSEARCH_URL (docs/deploy.md)" .Values.replicaCount .Values.autoscaling.enabled) }}
{{- end }}
{{- if and (ne $mode "embedded") (not (include "poimen-memory.hasOpensearch" .)) }}
{{- fail "a shared database (postgresql.enabled, existingSecret or secret.databaseUrl) needs a shared OpenSearch too (the service refuses DATABASE_URL without OPENSEARCH_URL: each pod would keep its own lexical index): set opensearch.enabled=true or config.OPENSEARCH_URL" }}
{{- end }}
{{- if and .Values.postgresql.enabled (or .Values.secret.databaseUrl .Values.embeddedDatabase) }}
{{- fail "postgresql.enabled=true wires DATABASE_URL to the CloudNativePG Cluster: leave secret.databaseUrl empty and embeddedDatabase false" }}
{{- end }}
{{- if eq $mode "cnpg" }}
{{- if or .Values.secret.ownerDatabaseUrl .Values.migrations.ownerDatabaseUrlSecret.name }}
{{- fail "postgresql.enabled=true: the migrations Job connects as the Cluster's owner (`<cluster>-app` Secret); leave secret.ownerDatabaseUrl and migrations.ownerDatabaseUrlSecret.name empty" }}
{{- end }}
{{- $role := .Values.databaseRuntimeRole }}
{{- $managed := false }}
{{- range (dig "cluster" "roles" list .Values.postgresql) }}
{{- if and (eq (toString .name) $role.name) (eq (toString (dig "passwordSecret" "name" "" .)) $role.secretName) .login (not .superuser) (not .bypassrls) (ne (toString .ensure) "absent") }}{{ $managed = true }}{{ end }}
{{- end }}
{{- if not $managed }}
{{- fail (printf "postgresql.enabled=true serves as databaseRuntimeRole.name=%s: postgresql.cluster.roles must hold it as values.yaml does (name %s, login true, superuser false, bypassrls false, passwordSecret.name %s) so that CloudNativePG creates it" $role.name $role.name $role.secretName) }}
{{- end }}
{{- else if and .Values.existingSecret .Values.secret.ownerDatabaseUrl }}
{{- fail "secret.ownerDatabaseUrl is part of the chart-managed Secret, unused with existingSecret: put the owner's URL in a Secret and name it in migrations.ownerDatabaseUrlSecret" }}
{{- else if and .Values.secret.ownerDatabaseUrl .Values.migrations.ownerDatabaseUrlSecret.name }}
{{- fail "set the owner's URL once: secret.ownerDatabaseUrl or migrations.ownerDatabaseUrlSecret.name, not both" }}
{{- else if and (eq $mode "embedded") (or .Values.secret.ownerDatabaseUrl .Values.migrations.ownerDatabaseUrlSecret.name) }}
{{- fail "secret.ownerDatabaseUrl / migrations.ownerDatabaseUrlSecret are for an external database (the Job's owner URL): set the service's DATABASE_URL too (secret.databaseUrl or existingSecret), or leave them empty" }}
{{- end }}
{{- if and .Values.postgresql.enabled (ne (include "poimen-memory.postgresql.namespace" .) .Release.Namespace) }}
{{- fail (printf "postgresql.namespaceOverride=%s puts the Cluster's Secrets outside the release's namespace %s, but the server and the migrations Job read them by secretKeyRef, which only reaches their own namespace: leave postgresql.namespaceOverride empty, or run your own PostgreSQL with existingSecret" (include "poimen-memory.postgresql.namespace" .) .Release.Namespace) }}
{{- end }}
{{- if and .Values.jwtKeyFile (not .Values.existingSecret) }}
{{- $material := ternary .Values.secret.jwtPublicKey .Values.secret.jwks (eq .Values.jwtKeyFile "publicKey") }}
{{- if not $material }}
{{- fail (printf "jwtKeyFile=%s with the chart-managed Secret needs its key: set %s (or existingSecret holding %s); the pod could never mount it" .Values.jwtKeyFile (ternary "secret.jwtPublicKey" "secret.jwks" (eq .Values.jwtKeyFile "publicKey")) (ternary "JWT_PUBLIC_KEY" "JWT_JWKS" (eq .Values.jwtKeyFile "publicKey"))) }}
{{- end }}
{{- end }}
{{- if .Values.opensearch.enabled }}
{{- if .Values.config.OPENSEARCH_URL }}
{{- fail "opensearch.enabled=true points OPENSEARCH_URL at the bundled OpenSearch: leave config.OPENSEARCH_URL empty (or disable opensearch to use your own)" }}
{{- end }}
{{- if .Values.opensearchCredentials.create }}
{{- $wired := false }}
{{- range .Values.opensearch.extraEnvs }}
{{- if and (eq .name "OPENSEARCH_INITIAL_ADMIN_PASSWORD") .valueFrom .valueFrom.secretKeyRef }}
{{- if eq .valueFrom.secretKeyRef.name $.Values.opensearchCredentials.secretName }}{{ $wired = true }}{{ end }}
{{- end }}
{{- end }}
{{- if not $wired }}
{{- fail (printf "opensearchCredentials.create=true generates the admin password in Secret %s: opensearch.extraEnvs must read OPENSEARCH_INITIAL_ADMIN_PASSWORD from it (secretKeyRef name %s, key password), as values.yaml does" .Values.opensearchCredentials.secretName .Values.opensearchCredentials.secretName) }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.opensearchRole.create }}
{{- $security := default dict .Values.opensearch.securityConfig }}
{{- if not .Values.opensearch.enabled }}
{{- fail "opensearchRole.create=true renders the role for the bundled OpenSearch: it needs opensearch.enabled=true (with your own OpenSearch, create the role there: docs/deploy.md)" }}
{{- end }}
{{- if ne (toString (default "" $security.rolesSecret)) .Values.opensearchRole.secretName }}
{{- fail (printf "opensearchRole.create=true renders roles.yml in Secret %s: opensearch.securityConfig.rolesSecret must name it (%s), or OpenSearch never reads it" .Values.opensearchRole.secretName .Values.opensearchRole.secretName) }}
{{- end }}
{{- if hasKey (default dict (default dict $security.config).data) "roles.yml" }}
{{- fail "opensearchRole.create=true renders roles.yml: leave it out of opensearch.securityConfig.config.data (both would be mounted at one path)" }}
{{- end }}
{{- if not .Values.config.OPENSEARCH_INDEX }}
{{- fail "opensearchRole.create=true makes the role's index patterns from config.OPENSEARCH_INDEX: set it" }}
{{- end }}
{{- range .Values.extraEnv }}
{{- if eq .name "OPENSEARCH_INDEX" }}
{{- fail "opensearchRole.create=true makes the role's index patterns from config.OPENSEARCH_INDEX: set the index there, not in extraEnv" }}
{{- end }}
{{- end }}
{{- end }}
{{- include "poimen-memory.validateExtraVolumes" (dict "volumes" .Values.extraVolumes "mounts" .Values.extraVolumeMounts "key" "") }}
{{- include "poimen-memory.validateExtraVolumes" (dict "volumes" .Values.migrations.extraVolumes "mounts" .Values.migrations.extraVolumeMounts "key" "migrations.") }}
{{- end }}

{{/*
Stops the render on an extra volume or mount of the server pod ("key" "") or the migrations Job ("key"
"migrations.") that collides with the chart's own, whether this release uses them or not (turning on
jwtKeyFile or a vocabulary later must not collide), or with another extra one; or a mount of a volume the
same pod's extra volumes do not hold. The API server would refuse a duplicate name or path only at install,
and a mount inside (or above) the read-only /etc/poimen/* mounts stops the container at start.
Call with (dict "volumes" list "mounts" list "key" "" or "migrations.").
*/}}
{{- define "poimen-memory.validateExtraVolumes" -}}
{{- $key := .key }}
{{- $own := list "tmp" "data" "flags" "vocabulary" "jwt-key" "opensearch-ca" }}
{{- $names := list }}
{{- range .volumes }}
{{- if has .name $own }}
{{- fail (printf "%sextraVolumes: the volume name %q is the chart's own (%s): choose another name" $key .name (join ", " $own)) }}
{{- end }}
{{- if has .name $names }}
{{- fail (printf "%sextraVolumes: the volume name %q is listed twice" $key .name) }}
{{- end }}
{{- $names = append $names .name }}
{{- end }}
{{- $paths := list }}
{{- range .mounts }}
{{- $path := clean .mountPath }}
{{- $taken := hasPrefix "/etc/poimen/" $path }}
{{- range list "/tmp" "/data" "/etc/poimen" }}
{{- if or (eq $path .) (hasPrefix (printf "%s/" (trimSuffix "/" $path)) .) }}{{ $taken = true }}{{ end }}
{{- end }}
{{- if $taken }}
{{- fail (printf "%sextraVolumeMounts: the mount path %s collides with the chart's mounts (/tmp, /data and /etc/poimen: the path itself, anything inside /etc/poimen, or a folder above them): mount elsewhere, e.g. /etc/postgresql-ca or /models (a folder inside /tmp or /data is fine)" $key .mountPath) }}
{{- end }}
{{- if has $path $paths }}
{{- fail (printf "%sextraVolumeMounts: the mount path %s is listed twice" $key .mountPath) }}
{{- end }}
{{- $paths = append $paths $path }}
{{- if not (has .name $names) }}
{{- fail (printf "%sextraVolumeMounts: %s mounts the volume %q, which %sextraVolumes does not hold (the server's and the migrations Job's volumes are listed apart)" $key .mountPath .name $key) }}
{{- end }}
{{- end }}
{{- end }}

{{/* With the bundled OpenSearch, no CA Secret and OPENSEARCH_VERIFY_CERTS unset, the demo certificates cannot be
verified: verification goes off (NOTES says so loudly). An explicit "true" is kept (certificates of a CA the
image trusts); it was turned into "false" here. */}}
{{- define "poimen-memory.opensearch.unverifiedDemoTls" -}}
{{- if and .Values.opensearch.enabled (eq (default "https" .Values.opensearch.protocol) "https") (not .Values.opensearchCa.secretName) (eq (toString (default "" .Values.config.OPENSEARCH_VERIFY_CERTS)) "") -}}
true
{{- end -}}
{{- end }}

{{/*
The server's DATABASE_URL. cnpg: the runtime role (databaseRuntimeRole), its password from its basic-auth Secret,
on the `<cluster>-rw` Service; Kubernetes expands $(POIMEN_DATABASE_RUNTIME_PASSWORD), defined just before.
Otherwise the chart's Secret or existingSecret (optional in embedded mode).
*/}}
{{- define "poimen-memory.databaseUrlEnv" -}}
{{- $mode := include "poimen-memory.databaseMode" . -}}
{{- if eq $mode "cnpg" -}}
- name: POIMEN_DATABASE_RUNTIME_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.databaseRuntimeRole.secretName }}
      key: password
- name: DATABASE_URL
  value: {{ printf "postgresql://%s:$(POIMEN_DATABASE_RUNTIME_PASSWORD)@%s.%s.svc:5432/%s" .Values.databaseRuntimeRole.name (include "poimen-memory.postgresql.rwService" .) (include "poimen-memory.postgresql.namespace" .) (include "poimen-memory.postgresql.database" .) | quote }}
{{- else -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "poimen-memory.secretName" . }}
      key: DATABASE_URL
      optional: {{ eq $mode "embedded" }}
{{- end }}
{{- end }}

{{/* The application database CloudNativePG bootstraps (the cluster chart's default is app). */}}
{{- define "poimen-memory.postgresql.database" -}}
{{- $initdb := dig "cluster" "initdb" dict .Values.postgresql }}
{{- default "app" (get $initdb "database") }}
{{- end }}

{{/*
True (non-empty) when the migrations Job connects as the tables' owner and grants databaseRuntimeRole.name
(DATABASE_RUNTIME_ROLE): always with cnpg; with an external database when the owner's URL is given apart.
*/}}
{{- define "poimen-memory.grantsRuntimeRole" -}}
{{- $mode := include "poimen-memory.databaseMode" . }}
{{- if or (eq $mode "cnpg") (and (eq $mode "external") (or .Values.migrations.ownerDatabaseUrlSecret.name (and (not .Values.existingSecret) .Values.secret.ownerDatabaseUrl))) }}true{{- end }}
{{- end }}

{{/*
The migrations Job's DATABASE_URL, always the tables' owner: the CloudNativePG app Secret's `uri` (user `app`),
migrations.ownerDatabaseUrlSecret, existingSecret's DATABASE_URL, or the Job's hook Secret.
*/}}
{{- define "poimen-memory.migrationDatabaseUrlEnv" -}}
{{- $mode := include "poimen-memory.databaseMode" . -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
{{- if eq $mode "cnpg" }}
      name: {{ include "poimen-memory.postgresql.appSecret" . }}
      key: uri
{{- else if .Values.migrations.ownerDatabaseUrlSecret.name }}
      name: {{ .Values.migrations.ownerDatabaseUrlSecret.name }}
      key: {{ .Values.migrations.ownerDatabaseUrlSecret.key }}
{{- else if .Values.existingSecret }}
      name: {{ .Values.existingSecret }}
      key: DATABASE_URL
{{- else }}
      name: {{ include "poimen-memory.fullname" . }}-migrations
      key: DATABASE_URL
{{- end }}
{{- end }}

{{/*
An init container that waits until TCP host:port targets accept connections (the app image's Python, no
extra image): WAIT_FOR lists them; with withDatabaseUrl the host of DATABASE_URL is added. Call with
(dict "root" $ "targets" (list "host:port" ...) "withDatabaseUrl" bool).
*/}}
{{- define "poimen-memory.waitContainer" -}}
{{- $root := .root -}}
- name: wait-for-backends
  image: {{ include "poimen-memory.image" $root }}
  imagePullPolicy: {{ $root.Values.image.pullPolicy }}
  command:
    - python
    - -c
    - |
      import os, socket, sys, time, urllib.parse
      targets = os.environ.get("WAIT_FOR", "").split()
      if os.environ.get("DATABASE_URL"):
          url = urllib.parse.urlsplit(os.environ["DATABASE_URL"])
          targets.append(f"{url.hostname}:{url.port or 5432}")
      for target in targets:
          host, port = target.rsplit(":", 1)
          while True:
              try:
                  socket.create_connection((host, int(port)), timeout=3).close()
                  print("reachable:", target, flush=True)
                  break
              except OSError as error:
                  print("waiting for", target, "-", error, flush=True)
                  time.sleep(5)
  env:
    - name: WAIT_FOR
      value: {{ join " " .targets | quote }}
    {{- if .withDatabaseUrl }}
    {{- include "poimen-memory.migrationDatabaseUrlEnv" $root | nindent 4 }}
    {{- end }}
  resources:
    requests:
      cpu: 10m
      memory: 32Mi
      ephemeral-storage: 16Mi
    limits:
      cpu: 100m
      memory: 64Mi
      ephemeral-storage: 64Mi
  securityContext:
    {{- toYaml $root.Values.containerSecurityContext | nindent 4 }}
  volumeMounts:
    - name: tmp
      mountPath: /tmp
{{- end }}

{{/*
Pod-level security context and the common pod settings every pod of this chart shares. No service account
token, but on the server's pods when the injected flagd watches its FeatureFlag through the API server.
*/}}
{{- define "poimen-memory.podSecurity" -}}
automountServiceAccountToken: false
{{- include "poimen-memory.podSettings" . }}
{{- end }}

{{- define "poimen-memory.serverPodSecurity" -}}
automountServiceAccountToken: {{ and .Values.openfeature.enabled (eq .Values.openfeature.mode "sidecar") (eq .Values.openfeature.sidecar.syncProvider "kubernetes") }}
{{- include "poimen-memory.podSettings" . }}
{{- end }}

{{- define "poimen-memory.podSettings" }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.image.pullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ . }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
checkov findings this chart accepts, as `checkov.io/skipN: CHECK=reason` annotations on the object.
Call with (dict "root" $ "checks" (list "CKV_K8S_15" ...)); each reason is stated once, here.
*/}}
{{- define "poimen-memory.checkovSkips" -}}
{{- $reasons := dict
  "CKV_K8S_15" "IfNotPresent suits immutable release tags and digests; Always makes each pod start depend on the registry"
  "CKV_K8S_43" "pinned by an immutable release tag; setting image.digest pins by digest and clears this finding"
  "CKV_K8S_35" "the app reads DATABASE_URL, OpenSearch credentials and JWT_SECRET from env; JWT keys and the CA are mounted as files"
  "CKV_K8S_8" "one-shot helm test pod that exits after one request; a liveness probe has nothing to watch"
  "CKV_K8S_9" "one-shot helm test pod that is never a Service endpoint; a readiness probe has no consumer"
}}
{{- $index := 0 }}
{{- range .checks }}
{{- if not (and (eq . "CKV_K8S_43") $.root.Values.image.digest) }}
{{- $index = add1 $index }}
checkov.io/skip{{ $index }}: {{ printf "%s=%s" . (get $reasons .) | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The FeatureFlag the OpenFeature path reads, as namespace/name: the rendered one, or openfeature.existingFeatureFlag.
*/}}
{{- define "poimen-memory.featureFlagRef" -}}
{{- with .Values.openfeature.existingFeatureFlag -}}
{{ . }}
{{- else -}}
{{ .Release.Namespace }}/{{ include "poimen-memory.fullname" . }}-flags
{{- end -}}
{{- end }}
