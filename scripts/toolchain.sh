#!/usr/bin/env bash
# npm run toolchain: builds the real Pulumi CLI, its Node.js language host and the three providers the program
# uses (command, random, docker) from the Go module proxy, into a cache outside the repository keyed by their
# versions. Skips a binary that is there with the right version, checks every binary's version, and prints the
# directory. A module the proxy cannot give fails naming the module and the command; every binary is tried and
# all failures are reported together. No binary is ever written inside the repository.
#
#   scripts/toolchain.sh          build what is missing, print the directory
#   scripts/toolchain.sh --dir    print the directory only (used by scripts/pulumi.sh)
#   SPARK_VLLM_TOOLCHAIN_ONLY="pulumi pulumi-resource-command"   build only the binaries named
#
# Directory: $SPARK_VLLM_TOOLCHAIN_DIR if set, else ${XDG_CACHE_HOME:-$HOME/.cache}/spark-vllm/toolchain/<key>,
# <key> naming the version of every binary.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
npm_version() { node -p "require(process.argv[1]).version" "$ROOT/node_modules/$1/package.json"; }

PULUMI_VERSION=$(npm_version @pulumi/pulumi) || { echo "toolchain: cannot read node_modules/@pulumi/pulumi/package.json (run npm ci)" >&2; exit 1; }
COMMAND_VERSION=$(npm_version @pulumi/command) || exit 1

# Provider sources: the commit behind each release tag, read from the tags of pulumi/pulumi-command (v1.2.1),
# pulumi/pulumi-random (v4.21.1) and pulumi/pulumi-docker (v5.1.0). The provider modules live in provider/
# and have no tags of their own (the tags are v1.2.1, not provider/v1.2.1), so only a commit resolves.
# random and docker are built at 4.21.1 and 5.1.0 although npm has @pulumi/random 4.21.2 and @pulumi/docker
# 5.2.0: no commit of 4.21.2/5.2.0 was available to pin. npm random 4.21.2 differs from 4.21.1 in doc comments
# only; docker 5.2.0 adds one input, Container.deviceCgroupRules, which nothing in components/ sets
# (tests/real/toolchain.test.ts checks that). The CLI runs a provider found on PATH whatever version the SDK
# asks for (pulumi/pulumi sdk/go/common/workspace/plugins.go, "ambient" plugins).
COMMAND_COMMIT=7f3eb6f3b77cd0fa3895ba437a695dd393f7dd25  # pulumi-command tag v1.2.1
RANDOM_VERSION=4.21.1
RANDOM_COMMIT=f2d8b029d0f708bd14bad9479e016560de9c0b6d   # pulumi-random tag v4.21.1
DOCKER_VERSION=5.1.0
DOCKER_COMMIT=e944612c4c970123d9a16a48c40d37dc84c89a70   # pulumi-docker tag v5.1.0
# pulumi-docker v5.1.0's provider/go.mod replaces the upstream with ../upstream, a git submodule at
# kreuzwerker/terraform-provider-docker 5074970c71ce (v4.5.0); as a Go module that commit is this pseudo-version.
DOCKER_UPSTREAM=github.com/kreuzwerker/terraform-provider-docker@v0.0.0-20260618190003-5074970c71ce

if [ "$COMMAND_VERSION" != 1.2.1 ]; then
  echo "toolchain: @pulumi/command is $COMMAND_VERSION but scripts/toolchain.sh pins the commit of 1.2.1: update COMMAND_COMMIT" >&2
  exit 1
fi

KEY="pulumi-$PULUMI_VERSION.command-$COMMAND_VERSION.random-$RANDOM_VERSION.docker-$DOCKER_VERSION"
DIR=${SPARK_VLLM_TOOLCHAIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/spark-vllm/toolchain/$KEY}
if [ "${1:-}" = --dir ]; then echo "$DIR"; exit 0; fi
case "$DIR/" in "$ROOT"/*) echo "toolchain: $DIR is inside the repository; choose a folder outside it" >&2; exit 1;; esac

mkdir -p "$DIR/.work"
FAILURES=()
fail() { FAILURES+=("$1"); echo "toolchain: FAILED $1" >&2; }

# Release builds: CGO_ENABLED=0 and -trimpath, ldflags "-w -s -X <version variable>=v<version>", and for the CLI
# and language host tags osusergo,grpcnotrace (pulumi/pulumi .goreleaser.yml and scripts/go-wrapper.sh;
# pulumi-command .goreleaser.yml; pulumi-docker Makefile: -tags no_compose).
export CGO_ENABLED=0 GOFLAGS=-mod=mod

# step NAME CMD...: runs CMD in the current directory, logging to .work/NAME.log; on failure records NAME, the
# command and the log's last lines.
step() {
  local name=$1; shift
  echo "+ $*" >>"$DIR/.work/$name.log"
  if ! "$@" >>"$DIR/.work/$name.log" 2>&1; then
    fail "$name: \`$*\` failed in $PWD; last lines of $DIR/.work/$name.log:
$(tail -n 5 "$DIR/.work/$name.log")"
    return 1
  fi
}

# download NAME MODULE@REF: asks the Go module proxy for a module; prints its resolved version.
download() {
  local name=$1 modref=$2 json
  if ! json=$(go mod download -json "$modref" 2>&1) || grep -q '"Error"' <<<"$json"; then
    fail "$name: the Go module proxy cannot give ${modref%@*} (at ${modref#*@}): \`go mod download -json $modref\` says:
$(grep -o '"Error": .*' <<<"$json" || echo "$json")"
    return 1
  fi
  sed -n 's/^\t"Version": "\(.*\)",$/\1/p' <<<"$json"
}

# built_from BIN MODULE VERSION: true when BIN's Go build information names MODULE at VERSION (a version or a
# commit prefix). With -trimpath the build information leaves out -ldflags, so the -X version cannot be read back.
built_from() {
  [ -x "$1" ] && go version -m "$1" 2>/dev/null | grep -qE "^[[:space:]]+(mod|dep)[[:space:]]+$2[[:space:]]+[^[:space:]]*$3"
}

# wrapper NAME MODULE VERSION: a throw-away main module in .work/NAME that requires MODULE@VERSION with the
# non-local replaces of MODULE's own go.mod (`go install m@v` refuses a module with replaces).
wrapper() {
  local name=$1 module=$2 version=$3 gomod
  rm -rf "$DIR/.work/$name" && mkdir -p "$DIR/.work/$name" && cd "$DIR/.work/$name" || return 1
  step "$name" go mod init "spark-vllm-toolchain/$name" || return 1
  gomod=$(go mod download -json "$module@$version" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  go mod edit -json "$gomod" | node -e '
    const mod = JSON.parse(require("fs").readFileSync(0, "utf8"));
    for (const r of mod.Replace ?? []) if (r.New.Version)
      console.log(`${r.Old.Path}${r.Old.Version ? "@" + r.Old.Version : ""}=${r.New.Path}@${r.New.Version}`);
  ' | while read -r rep; do go mod edit -replace "$rep"; done
}

# build_go NAME PACKAGE VERSIONVAR WANT TAGS GETS...: `go get` GETS into the wrapper, then builds PACKAGE as
# $DIR/NAME with WANT in VERSIONVAR.
build_go() {
  local name=$1 pkg=$2 var=$3 want=$4 tags=$5; shift 5
  step "$name" go get "$@" || return 1
  step "$name" go build -trimpath ${tags:+-tags "$tags"} -ldflags "-w -s -X $var=$want" -o "$DIR/$name.tmp" "$pkg" || return 1
  mv "$DIR/$name.tmp" "$DIR/$name"
}

# timed NAME BUILD CHECK WANT: runs BUILD unless CHECK passes, checks again, reports the time it took.
timed() {
  local name=$1 build=$2 check=$3 want=$4 start=$SECONDS
  case " ${SPARK_VLLM_TOOLCHAIN_ONLY:-$name} " in *" $name "*) ;; *) return;; esac
  if $check; then echo "toolchain: $name $want already built"; return; fi
  echo "toolchain: building $name $want ..."
  if ( $build ); then
    if $check; then
      echo "toolchain: built $name $want in $((SECONDS - start)) s"
    else
      fail "$name: built, but $DIR/$name is not $want"
    fi
  else
    FAILURES+=("$name (see above)")
  fi
}

SDK=github.com/pulumi/pulumi/sdk/v3
PKG=github.com/pulumi/pulumi/pkg/v3
VERSION_VAR=$SDK/go/common/version.Version  # moved to sdk in 3.143.0

cli() {
  wrapper pulumi "$PKG" "v$PULUMI_VERSION" || exit 1
  build_go pulumi "$PKG/cmd/pulumi" "$VERSION_VAR" "v$PULUMI_VERSION" osusergo,grpcnotrace \
    "$PKG@v$PULUMI_VERSION" "$SDK@v$PULUMI_VERSION" || exit 1
}

# The language host is its own module with no tags (pulumi/pulumi sdk/nodejs/cmd/pulumi-language-nodejs/go.mod):
# it is asked for at the commit of the SDK's release, which the proxy reports as Origin.Hash when it knows it;
# SPARK_VLLM_LANGUAGE_HOST_REF overrides it.
language_host() {
  local m=github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3 ref v
  ref=${SPARK_VLLM_LANGUAGE_HOST_REF:-$(go mod download -json "$SDK@v$PULUMI_VERSION" | node -e '
    const j = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(j.Origin?.Hash ?? "")')}
  if [ -z "$ref" ]; then
    fail "pulumi-language-nodejs: $m has no tags and the proxy gives no commit for $SDK@v$PULUMI_VERSION (Origin.Hash is empty); set SPARK_VLLM_LANGUAGE_HOST_REF to the commit of v$PULUMI_VERSION"
    exit 1
  fi
  v=$(download pulumi-language-nodejs "$m@$ref") || exit 1
  wrapper pulumi-language-nodejs "$m" "$v" || exit 1
  build_go pulumi-language-nodejs "$m" "$VERSION_VAR" "v$PULUMI_VERSION" osusergo,grpcnotrace \
    "$m@$v" "$PKG@v$PULUMI_VERSION" "$SDK@v$PULUMI_VERSION" || exit 1
}

command_provider() {
  local m=github.com/pulumi/pulumi-command/provider v
  v=$(download pulumi-resource-command "$m@$COMMAND_COMMIT") || exit 1
  wrapper pulumi-resource-command "$m" "$v" || exit 1
  build_go pulumi-resource-command "$m/cmd/pulumi-resource-command" "$m/pkg/version.Version" "v$COMMAND_VERSION" "" \
    "$m/cmd/pulumi-resource-command@$v" || exit 1
}

# Bridged providers: main.go embeds schema-embed.json, which upstream generates from the committed schema.json
# and does not commit (its generate.go sets the schema's version and re-serializes it; the Makefile runs it with
# VERSION=$(PROVIDER_VERSION), no leading v, and links -X .../pkg/version.Version=$(PROVIDER_VERSION)). So the
# module is copied out of the module cache, schema-embed.json written there, and the copy used through a
# replace. A local replace in its go.mod needs a Go module to stand in for it (STAND_IN).
bridged_provider() {
  local name=$1 m=$2 commit=$3 want=$4 tags=$5 v dir rep old new
  v=$(download "$name" "$m@$commit") || exit 1
  wrapper "$name" "$m" "$v" || exit 1
  dir=$(go mod download -json "$m@$v" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  cp -r "$dir" src && chmod -R u+w src || exit 1
  go mod edit -replace "$m=./src"
  for rep in $(go mod edit -json src/go.mod | node -e '
      const mod = JSON.parse(require("fs").readFileSync(0, "utf8"));
      for (const r of mod.Replace ?? []) if (!r.New.Version) console.log(`${r.Old.Path}=${r.New.Path}`);'); do
    old=${rep%%=*}; new=${STAND_IN[$old]:-}
    if [ -z "$new" ]; then
      fail "$name: $m's go.mod replaces $old with a local folder (${rep#*=}) that is not in its module zip, and no Go module stands in for it"
      exit 1
    fi
    go mod edit -replace "$old=$new" && step "$name" go mod download "$new" || exit 1
  done
  VERSION=$want node -e '
    const fs = require("fs"), [from, to] = process.argv.slice(1);
    const spec = JSON.parse(fs.readFileSync(from, "utf8")); spec.version = process.env.VERSION;
    fs.writeFileSync(to, JSON.stringify(spec));' "src/cmd/$name/schema.json" "src/cmd/$name/schema-embed.json" || exit 1
  build_go "$name" "$m/cmd/$name" "$m/pkg/version.Version" "$want" "$tags" "$m/cmd/$name@$v" || exit 1
}
declare -A STAND_IN=([github.com/terraform-providers/terraform-provider-docker]=$DOCKER_UPSTREAM)
random_provider() { bridged_provider pulumi-resource-random github.com/pulumi/pulumi-random/provider/v4 "$RANDOM_COMMIT" "$RANDOM_VERSION" ""; }
docker_provider() { bridged_provider pulumi-resource-docker github.com/pulumi/pulumi-docker/provider/v5 "$DOCKER_COMMIT" "$DOCKER_VERSION" no_compose; }

check_cli() { [ -x "$DIR/pulumi" ] && [ "$("$DIR/pulumi" version 2>/dev/null)" = "v$PULUMI_VERSION" ]; }
check_language_host() {
  built_from "$DIR/pulumi-language-nodejs" github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3 "" &&
    built_from "$DIR/pulumi-language-nodejs" "$SDK" "v$PULUMI_VERSION"
}
check_command() { built_from "$DIR/pulumi-resource-command" github.com/pulumi/pulumi-command/provider "${COMMAND_COMMIT:0:12}"; }
check_random() { built_from "$DIR/pulumi-resource-random" github.com/pulumi/pulumi-random/provider/v4 "${RANDOM_COMMIT:0:12}"; }
check_docker() { built_from "$DIR/pulumi-resource-docker" github.com/pulumi/pulumi-docker/provider/v5 "${DOCKER_COMMIT:0:12}"; }

timed pulumi cli check_cli "v$PULUMI_VERSION"
timed pulumi-language-nodejs language_host check_language_host "v$PULUMI_VERSION"
timed pulumi-resource-command command_provider check_command "v$COMMAND_VERSION"
timed pulumi-resource-random random_provider check_random "v$RANDOM_VERSION"
timed pulumi-resource-docker docker_provider check_docker "v$DOCKER_VERSION"

echo "$DIR"
if [ ${#FAILURES[@]} -gt 0 ]; then
  echo "toolchain: ${#FAILURES[@]} failure(s); the binaries that built are in $DIR" >&2
  exit 1
fi
