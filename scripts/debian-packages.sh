# Sourced by scripts/setup.sh and bench/setup.sh: `need_pkg NAME` collects Debian packages that are not
# installed; `install_missing` installs them (apt-get update only when something is missing) and
# returns 1 when nothing was missing; it expects `say` and `die` from the sourcing script.
# Sourced by tests/go-mcp-server/build.sh and tests/k8s/apiserver.sh too: `debian_mirror` and
# `private_apt`, for downloading packages of another Debian suite without installing anything.
missing=()
need_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed' || missing+=("$1"); }
install_missing() {
    ((${#missing[@]})) || return 1
    command -v apt-get >/dev/null 2>&1 || die "missing packages (${missing[*]}) and no apt-get"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "missing packages (${missing[*]}); run as root or install sudo"
        sudo="sudo -n"
    fi
    say "installing Debian packages: ${missing[*]}"
    # Explicit checks: `set -e` does not apply inside a function called as `install_missing || ...`.
    $sudo apt-get update -qq || die "apt-get update failed"
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || die "apt-get install failed"
}

# The Debian mirror this machine's apt already uses (nothing when there is none).
debian_mirror() {
    grep -hsE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list 2>/dev/null \
        | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n 1 | tr -d ' ' || true
}

# `private_apt DIR SUITE MIRROR`: an apt configuration of its own under DIR (its lists, its cache, an
# empty dpkg status, one source: MIRROR SUITE main, signed by Debian's archive keyring), so that apt
# resolves and downloads the whole closure of what is asked and installs nothing. Sets APT_OPTS, the
# options to give apt-get and apt-cache.
private_apt() {
    local dir=$1 suite=$2 mirror=$3
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    : > "$dir/status"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${mirror%/} $suite main" > "$dir/sources.list"
    APT_OPTS=(-o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=/nonexistent
              -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o "Dir::State::Status=$dir/status"
              -o APT::Sandbox::User=root -o Acquire::Retries=3)
}
