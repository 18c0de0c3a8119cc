#!/usr/bin/env bash
# Builds a local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), the kwok
# controller, Karpenter's kwok provider and its DRA kwok driver (hack/kube/karpenter/dra-kwok-driver: upstream's
# main with its addresses configurable) from the Go modules pinned in hack/kube/*/go.mod, into a cache outside
# the repository keyed by version; each piece is built only when missing (or when its go.sum changed).
# karpenter-dra, built only when asked for (bench/versus_karpenter.py runs it for DRA and reserved-capacity
# workloads), is Karpenter's kwok provider with hack/kube/karpenter/*.patch: its instance types declare the devices
# the cluster's DRAConfigs publish on them, as seed 000's experiment 3 patches it (kwok-dynamicresources.patch), and
# its reserved offerings name their capacity reservation (kwok-reservations.patch).
#
#   hack/kube/build.sh                 build what is missing (or whose sources changed), print where everything is
#   hack/kube/build.sh kubernetes      build one piece: kubernetes | kwok | karpenter | karpenter-dra (all: every one)
#   hack/kube/build.sh --paths         print the paths (shell assignments) without building
#   hack/kube/build.sh --check         exit 0 when kubernetes, kwok and karpenter are built, 1 otherwise
#
# KARPUI_KUBE_CACHE moves the cache (default ~/.cache/karpui-kube). Needs Go >= 1.26; Karpenter's module asks for
# a newer patch release, which Go fetches from the module proxy as golang.org/toolchain (GOTOOLCHAIN=auto).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${KARPUI_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpui-kube}"

# The version a module directory's go.mod requires of a module, read without Go so --paths works anywhere.
required() { awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$here/$1/go.mod"; }

k8s_version="$(required k8s k8s.io/kubernetes)"
etcd_version="$(required k8s go.etcd.io/etcd/server/v3)"
kwok_version="$(required kwok sigs.k8s.io/kwok)"
karpenter_version="$(required karpenter sigs.k8s.io/karpenter)"
k8s_dir="$cache/kubernetes-$k8s_version-etcd-$etcd_version"
kwok_dir="$cache/kwok-$kwok_version"
karpenter_dir="$cache/karpenter-$karpenter_version"
karpenter_dra_dir="$cache/karpenter-$karpenter_version-dra"
patches=("$here/karpenter/kwok-dynamicresources.patch" "$here/karpenter/kwok-reservations.patch")

paths() {
  cat <<EOF
KARPUI_KUBE_BIN=$k8s_dir/bin
KARPUI_KUBE_VERSION=$k8s_version
KARPUI_ETCD_VERSION=$etcd_version
KARPUI_KWOK_BIN=$kwok_dir/bin/kwok
KARPUI_KWOK_STAGES=$kwok_dir/stages
KARPUI_KWOK_VERSION=$kwok_version
KARPUI_KARPENTER_BIN=$karpenter_dir/bin/karpenter-kwok
KARPUI_KARPENTER_DRA_BIN=$karpenter_dra_dir/bin/karpenter-kwok-dra
KARPUI_DRA_DRIVER_BIN=$karpenter_dir/bin/dra-kwok-driver
KARPUI_KARPENTER_CRDS=$karpenter_dir/crds
KARPUI_KARPENTER_VERSION=$karpenter_version
EOF
}

# A piece is built when its stamp names the sources it was built from: go.mod, go.sum and any Go file of ours, and
# for karpenter-dra the patches as well (so a changed patch rebuilds it, and only it).
stamp_of() { find "$here/$1" -type f \( -name 'go.*' -o -name '*.go' \) | sort | xargs sha256sum | sed "s|$here/||" | sha256sum | cut -c1-16; }
stamp() {
  case "$1" in
    karpenter-dra) { stamp_of karpenter; cat "${patches[@]}" | sha256sum; } | sha256sum | cut -c1-16 ;;
    *) stamp_of "$(mod_of "$1")" ;;
  esac
}
built() { [[ -f "$(dir_of "$1")/.built" && "$(cat "$(dir_of "$1")/.built")" == "$(stamp "$1")" ]]; }

now() { date +%s; }
say() { printf '[kube-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# go build -v names each package as it compiles it: the full output goes to a log beside the cache (the piece's),
# and a count every 100 packages shows a 20-minute build is alive.
gobuild() { # module-dir, out, ldflags, then go build's flags and packages
  local mod="$1" out="$2" ldflags="$3" log="$cache/build-$piece.log"
  shift 3
  if ! (cd "$here/$mod" && CGO_ENABLED=0 GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" go build -v -trimpath -ldflags "-s -w $ldflags" \
    -o "$out" "$@") > >(tee -a "$log" | awk -v m="$mod" '{ n++ } n % 100 == 0 { printf "[kube-build] %s: %d packages compiled\n", m, n; fflush() }' >&2) 2>&1; then
    say "FAILED: go build in hack/kube/$mod; the last lines of $log:"
    tail -n 30 "$log" >&2
    return 1
  fi
}

build_kubernetes() {
  local tmp="$k8s_dir.tmp" minor
  minor="$(cut -d. -f2 <<<"${k8s_version#v}")"
  local ld=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    ld+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  rm -rf "$tmp" && mkdir -p "$tmp/bin"
  say "kubernetes $k8s_version: kube-apiserver, kube-controller-manager, kube-scheduler"
  gobuild k8s "$tmp/bin/" "$ld" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler
  say "etcd $etcd_version"
  gobuild k8s "$tmp/bin/etcd" "" go.etcd.io/etcd/server/v3
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler; do
    [[ -x "$tmp/bin/$b" ]] || { say "FAILED: $b was not built (run: cd hack/kube/k8s && go build ./...)"; return 1; }
  done
  stamp kubernetes >"$tmp/.built"
  rm -rf "$k8s_dir" && mv "$tmp" "$k8s_dir"
}

build_kwok() {
  local tmp="$kwok_dir.tmp" src
  rm -rf "$tmp" && mkdir -p "$tmp/bin" "$tmp/stages"
  say "kwok $kwok_version: the kwok controller"
  gobuild kwok "$tmp/bin/kwok" "" sigs.k8s.io/kwok/cmd/kwok
  [[ -x "$tmp/bin/kwok" ]] || { say "FAILED: kwok was not built"; return 1; }
  # The controller refuses to start without Stage objects: keep the module's fast node and pod stages beside it.
  src="$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
  for stage in node/fast node/heartbeat-with-lease pod/fast; do
    for f in "$src/kustomize/stage/$stage"/*.yaml; do
      [[ "$(basename "$f")" == kustomization.yaml ]] && continue
      cp "$f" "$tmp/stages/${stage//\//-}-$(basename "$f")"
    done
  done
  chmod -R u+w "$tmp"
  stamp kwok >"$tmp/.built"
  rm -rf "$kwok_dir" && mv "$tmp" "$kwok_dir"
}

build_karpenter() {
  local tmp="$karpenter_dir.tmp" src
  rm -rf "$tmp" && mkdir -p "$tmp/bin" "$tmp/crds"
  say "karpenter $karpenter_version: its kwok provider, as karpenter-kwok (kwok's controller is also named kwok)"
  gobuild karpenter "$tmp/bin/karpenter-kwok" "-X sigs.k8s.io/karpenter/pkg/operator.Version=$karpenter_version" \
    sigs.k8s.io/karpenter/kwok
  [[ -x "$tmp/bin/karpenter-kwok" ]] || { say "FAILED: karpenter-kwok was not built"; return 1; }
  say "karpenter $karpenter_version: its DRA kwok driver (publishes ResourceSlices on kwok nodes as DRAConfigs say)"
  gobuild karpenter "$tmp/bin/dra-kwok-driver" "" ./dra-kwok-driver
  [[ -x "$tmp/bin/dra-kwok-driver" ]] || { say "FAILED: dra-kwok-driver was not built"; return 1; }
  src="$(cd "$here/karpenter" && GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)"
  cp "$src"/pkg/apis/crds/*.yaml "$src"/kwok/apis/crds/*.yaml "$src"/dra-kwok-driver/pkg/apis/crds/*.yaml "$tmp/crds/"
  chmod -R u+w "$tmp"
  stamp karpenter >"$tmp/.built"
  rm -rf "$karpenter_dir" && mv "$tmp" "$karpenter_dir"
}

build_karpenter_dra() {
  local tmp="$karpenter_dra_dir.tmp" src patch_file
  rm -rf "$tmp" && mkdir -p "$tmp/bin" "$tmp/mod"
  say "karpenter $karpenter_version with ${patches[*]##*/}: its kwok provider declaring DRAConfigs' devices and naming reservations, as karpenter-kwok-dra"
  # The module cache is shared and read-only: the patch goes into a copy of Karpenter's source beside the binary.
  src="$(cd "$here/karpenter" && GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)"
  cp -r "$src" "$tmp/src" && chmod -R u+w "$tmp/src"
  for patch_file in "${patches[@]}"; do
    patch -p1 --forward --quiet -d "$tmp/src" <"$patch_file" || { say "FAILED: $patch_file does not apply to $src"; return 1; }
  done
  # hack/kube/karpenter's go.mod with Karpenter replaced by the patched copy: every other module stays at the version
  # the unpatched binary is built with, and the repository's go.mod is left alone.
  cp "$here/karpenter/go.mod" "$here/karpenter/go.sum" "$tmp/mod/"
  printf '\nreplace sigs.k8s.io/karpenter => %s\n' "$tmp/src" >>"$tmp/mod/go.mod"
  gobuild karpenter "$tmp/bin/karpenter-kwok-dra" "-X sigs.k8s.io/karpenter/pkg/operator.Version=$karpenter_version" \
    -modfile="$tmp/mod/go.mod" sigs.k8s.io/karpenter/kwok
  [[ -x "$tmp/bin/karpenter-kwok-dra" ]] || { say "FAILED: karpenter-kwok-dra was not built"; return 1; }
  rm -rf "$tmp/src" "$tmp/mod"
  stamp karpenter-dra >"$tmp/.built"
  rm -rf "$karpenter_dra_dir" && mv "$tmp" "$karpenter_dra_dir"
}

dir_of() {
  case "$1" in
    kubernetes) echo "$k8s_dir" ;; kwok) echo "$kwok_dir" ;; karpenter) echo "$karpenter_dir" ;;
    karpenter-dra) echo "$karpenter_dra_dir" ;;
  esac
}
mod_of() { case "$1" in kubernetes) echo k8s ;; karpenter-dra) echo karpenter ;; *) echo "$1" ;; esac; }

pieces=()
for arg in "$@"; do
  case "$arg" in
    --paths) paths; exit 0 ;;
    --check)
      for p in kubernetes kwok karpenter; do built "$p" || exit 1; done
      exit 0 ;;
    kubernetes | kwok | karpenter | karpenter-dra) pieces+=("$arg") ;;
    all) pieces+=(kubernetes kwok karpenter karpenter-dra) ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "hack/kube/build.sh: unknown argument '$arg' (kubernetes, kwok, karpenter, karpenter-dra, all, --paths, --check)" >&2; exit 2 ;;
  esac
done
((${#pieces[@]})) || pieces=(kubernetes kwok karpenter)

command -v go >/dev/null || { echo "hack/kube/build.sh: Go is not installed (need Go >= 1.26)" >&2; exit 3; }
mkdir -p "$cache"
# One build at a time per cache: a second caller waits and then finds the pieces built.
exec 9>"$cache/.lock"
flock 9

start="$(now)"
cold=0
for piece in "${pieces[@]}"; do
  p="$piece"
  if built "$p"; then
    say "$p: already built in $(dir_of "$p")"
    continue
  fi
  t0="$(now)"
  rm -f "$cache/build-$p.log"
  "build_${p//-/_}"
  cold=1
  say "$p built in $(($(now) - t0)) s -> $(dir_of "$p")"
done
((cold)) && say "build took $(($(now) - start)) s in all"
paths
