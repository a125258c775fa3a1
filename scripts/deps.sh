#!/bin/sh
# Installs what building and testing Baton needs on Debian when it is missing: a C and C++
# compiler, make, python3, pkg-config (Rust itself must already be there).
set -eu
need=""
command -v cc >/dev/null 2>&1 || need="$need gcc"
command -v c++ >/dev/null 2>&1 || need="$need g++"
command -v make >/dev/null 2>&1 || need="$need make"
command -v python3 >/dev/null 2>&1 || need="$need python3"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v nm >/dev/null 2>&1 || need="$need binutils"
python3 -c "import venv, ensurepip" >/dev/null 2>&1 || need="$need python3-venv"
[ -z "$need" ] && exit 0
echo "installing:$need"
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $need
