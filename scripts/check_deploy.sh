#!/usr/bin/env bash
# Check the deployment artifacts with the real tools (install them with scripts/install_k8s_tools.sh).
#
#   scripts/check_deploy.sh [OUT_DIR]     renders land in OUT_DIR (default: a temporary folder)
#
# Steps, each fatal:
#   0. scripts/chart_deps.sh: the dependency charts into charts/poimen-memory/charts/ (git-ignored)
#   1. helm lint --strict with each of the four renders' values
#   2. helm template: default (ci/default-values.yaml, namespace poimen), production (ci/production-values.yaml,
#      external databases), quickstart (values-quickstart.yaml: CloudNativePG + OpenSearch) and production-stack
#      (ci/production-stack-values.yaml: both dependencies, HA), the last three in namespace search
#   3. kubernetes-validate --strict against Kubernetes 1.35 (bundled schemas) on every object; the only schemas
#      allowed to be missing are the CRD kinds (ServiceMonitor, PrometheusRule, CloudNativePG Cluster), which
#      tests/deploy checks instead (the Cluster against the operator's CRD schema in ../shared/helm-deps)
#   4. yamllint (.yamllint) on this chart's objects of every render, the values files and k8s/. The objects the
#      dependency charts render are split off first (`*.deps.yaml`): their templates are upstream's, with
#      upstream's whitespace (trailing spaces, bracket spacing), which this repository cannot change
#   5. hadolint Dockerfile
#   6. checkov --framework kubernetes on this chart's objects of every render (and dockerfile on the
#      Dockerfile). Findings the chart accepts carry a `checkov.io/skipN` annotation with the reason on the
#      object itself; the skip list below holds the findings that depend on the install, not on the chart,
#      each with its reason. The dependency charts' objects are not checkov'd: they are upstream's templates
#      (no way to annotate them), hardened where their values allow it; kubernetes-validate and the CRD schema
#      check them
#   7. scripts/render_k8s.sh --check: k8s/ is what the chart renders today
# The last lines summarise objects and checkov counts.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHART="${ROOT}/charts/poimen-memory"
TOOLS_BIN="${K8S_TOOLS_PREFIX:-${HOME}/.cache/poimen-k8s-tools}/bin"
export PATH="${TOOLS_BIN}:${PATH}"
KUBERNETES_VERSION="${KUBERNETES_VERSION:-1.35.0}"

for tool in helm kubernetes-validate yamllint hadolint checkov; do
    command -v "${tool}" >/dev/null || { echo "check_deploy: ${tool} not found; run scripts/install_k8s_tools.sh" >&2; exit 2; }
done

if [[ $# -ge 1 ]]; then
    OUT="$1"
    mkdir -p "${OUT}"
else
    OUT="$(mktemp -d)"
    trap 'rm -rf "${OUT}"' EXIT
fi
cd "${ROOT}"
step() { printf '\n== %s\n' "$*"; }
"${ROOT}/scripts/chart_deps.sh"
RENDERS=(default production quickstart production-stack)
declare -A VALUES=(
    [default]="${CHART}/ci/default-values.yaml"
    [production]="${CHART}/ci/production-values.yaml"
    [quickstart]="${CHART}/values-quickstart.yaml"
    [production-stack]="${CHART}/ci/production-stack-values.yaml"
)
declare -A NAMESPACE=([default]=poimen [production]=search [quickstart]=search [production-stack]=search)

# Skipped only for the default-values render. Reason: NetworkPolicy is opt-in (networkPolicy.enabled) because
# it needs an enforcing CNI and site-specific peers; the production values turn it on and pass CKV2_K8S_6.
DEFAULT_RENDER_SKIPS="CKV2_K8S_6"
# The quickstart, for the same reason: it is the shortest path on any cluster, so it does not assume a CNI that
# enforces NetworkPolicy; the production-stack values turn it on (with the bundled databases as peers) and pass.
QUICKSTART_RENDER_SKIPS="CKV2_K8S_6"

step "helm lint --strict"
for render in "${RENDERS[@]}"; do
    helm lint --strict "${CHART}" --values "${VALUES[${render}]}"
done

step "helm template"
count_objects() { grep -c '^kind: ' "$1" || true; }
for render in "${RENDERS[@]}"; do
    helm template poimen-memory "${CHART}" --namespace "${NAMESPACE[${render}]}" --values "${VALUES[${render}]}" \
        >"${OUT}/${render}.yaml"
    # This chart's objects, and the dependency charts' (Source: poimen-memory/charts/...).
    awk 'BEGIN { RS = "\n---\n" } !/# Source: poimen-memory\/charts\// { sub(/^---\n/, ""); sub(/\n+$/, ""); if ($0 != "") printf "---\n%s\n", $0 }' \
        "${OUT}/${render}.yaml" >"${OUT}/${render}.own.yaml"
    awk 'BEGIN { RS = "\n---\n" } /# Source: poimen-memory\/charts\// { sub(/^---\n/, ""); sub(/\n+$/, ""); printf "---\n%s\n", $0 }' \
        "${OUT}/${render}.yaml" >"${OUT}/${render}.deps.yaml"
    echo "${render}: $(count_objects "${OUT}/${render}.own.yaml") objects of this chart, $(count_objects "${OUT}/${render}.deps.yaml") of its dependencies"
done

step "kubernetes-validate --strict (Kubernetes ${KUBERNETES_VERSION})"
CRD_KINDS="Couldn't find schema for kind (ServiceMonitor|PrometheusRule) with api version monitoring.coreos.com/v1"
CRD_KINDS="${CRD_KINDS}|Couldn't find schema for kind Cluster with api version postgresql.cnpg.io/v1"
for render in "${RENDERS[@]}"; do
    kubernetes-validate --kubernetes-version "${KUBERNETES_VERSION}" --strict --quiet "${OUT}/${render}.yaml" \
        2>&1 | tee "${OUT}/${render}.validate.txt"
    if grep -Ev "${CRD_KINDS}" "${OUT}/${render}.validate.txt" | grep -E '^(WARN|ERROR)' >/dev/null; then
        echo "check_deploy: kubernetes-validate reported problems in ${render}.yaml" >&2
        exit 1
    fi
done

step "yamllint"
yamllint --strict "${OUT}"/*.own.yaml "${CHART}/Chart.yaml" "${CHART}/Chart.lock" "${CHART}/values.yaml" \
    "${CHART}/values-quickstart.yaml" "${CHART}/ci" "${ROOT}/k8s" "${ROOT}/.yamllint" "${ROOT}/tests/deploy/prometheus-rules.test.yaml"

step "hadolint"
hadolint "${ROOT}/Dockerfile"

step "checkov"
checkov_summary=()
run_checkov() {  # run_checkov NAME FRAMEWORK FILE [SKIPS]
    local name="$1" framework="$2" file="$3" skips="${4:-}"
    local args=(--file "${file}" --framework "${framework}" --compact --quiet --skip-download)
    [[ -n "${skips}" ]] && args+=(--skip-check "${skips}")
    local status=0
    checkov "${args[@]}" >"${OUT}/${name}.checkov.txt" 2>&1 || status=$?
    cat "${OUT}/${name}.checkov.txt"
    checkov_summary+=("${name}: $(grep -m1 -o 'Passed checks: .*' "${OUT}/${name}.checkov.txt" || echo 'no summary')")
    return "${status}"
}
run_checkov default kubernetes "${OUT}/default.own.yaml" "${DEFAULT_RENDER_SKIPS}"
run_checkov production kubernetes "${OUT}/production.own.yaml"
run_checkov quickstart kubernetes "${OUT}/quickstart.own.yaml" "${QUICKSTART_RENDER_SKIPS}"
run_checkov production-stack kubernetes "${OUT}/production-stack.own.yaml"
run_checkov dockerfile dockerfile "${ROOT}/Dockerfile"

step "k8s/ in sync with the chart"
"${ROOT}/scripts/render_k8s.sh" --check

step "summary"
for render in "${RENDERS[@]}"; do
    echo "objects: ${render}=$(count_objects "${OUT}/${render}.yaml")"
done
printf 'checkov %s\n' "${checkov_summary[@]}"
echo "check_deploy: all checks passed"
