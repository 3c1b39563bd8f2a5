#!/usr/bin/env bash
# Put the chart's dependencies (Chart.yaml/Chart.lock: CloudNativePG `cluster` 0.8.1, `opensearch` 3.6.0)
# into charts/poimen-memory/charts/, which git ignores.
#
#   scripts/chart_deps.sh    copy the packaged charts from ${HELM_DEPS_DIR:-../shared/helm-deps} (offline CI),
#                            or, when that folder is absent, `helm dependency build` from the upstream repositories
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHART="${ROOT}/charts/poimen-memory"
DEPS="${HELM_DEPS_DIR:-${ROOT}/../shared/helm-deps}"
TOOLS_BIN="${K8S_TOOLS_PREFIX:-${HOME}/.cache/poimen-k8s-tools}/bin"
export PATH="${TOOLS_BIN}:${PATH}"

mkdir -p "${CHART}/charts"
if [[ -d "${DEPS}" ]]; then
    for package in cluster-0.8.1.tgz opensearch-3.6.0.tgz; do
        # Replaced by a rename, and only when it differs: a test run in parallel (pytest -n) may be reading
        # it with helm, which an in-place `cp` would hand a truncated archive. Helm skips dot-named files.
        if ! cmp -s "${DEPS}/${package}" "${CHART}/charts/${package}"; then
            cp "${DEPS}/${package}" "${CHART}/charts/.${package}.partial-$$"
            mv -f "${CHART}/charts/.${package}.partial-$$" "${CHART}/charts/${package}"
        fi
    done
else
    helm repo add cnpg https://cloudnative-pg.github.io/charts >/dev/null
    helm repo add opensearch https://opensearch-project.github.io/helm-charts/ >/dev/null
    helm dependency build "${CHART}"
fi
