#!/usr/bin/env bash
# Make sure the servers the tests start are installed (Debian packages): the database servers of the SQL
# toolkit tests, and the Prometheus server that scrapes --metrics-port in tests/observability.
#
# The tests start their own private PostgreSQL and MariaDB instances (tests/toolkits/conftest.py) and
# Prometheus (tests/observability/test_metrics_prometheus.py); this script only installs the binaries when
# they are missing, and starts nothing.
set -euo pipefail

have_postgres() {
    compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null && compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}

have_mariadb() {
    { command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || [ -x /usr/sbin/mysqld ]; } \
        && { command -v mariadb-install-db >/dev/null || command -v mysql_install_db >/dev/null; }
}

have_prometheus() {
    command -v prometheus >/dev/null || [ -x /usr/bin/prometheus ]
}

packages=()
have_postgres || packages+=(postgresql)
have_mariadb || packages+=(mariadb-server)
have_prometheus || packages+=(prometheus)

if [ "${#packages[@]}" -eq 0 ]; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "services.sh: missing ${packages[*]}; run as root (or install them with apt-get)" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
echo "services.sh: installing ${packages[*]}" >&2
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
have_postgres || { echo "services.sh: PostgreSQL binaries still missing after install" >&2; exit 1; }
have_mariadb || { echo "services.sh: MariaDB binaries still missing after install" >&2; exit 1; }
have_prometheus || { echo "services.sh: Prometheus still missing after install" >&2; exit 1; }
