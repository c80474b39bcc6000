# Sourced by scripts/setup.sh and bench/setup.sh: `need_pkg NAME` collects Debian packages that are not
# installed; `install_missing` installs them (apt-get update only when something is missing) and
# returns 1 when nothing was missing.
# Expects `say` and `die` from the sourcing script.
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
