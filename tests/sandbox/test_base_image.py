"""The base image is slim as Debian's -slim images are, whichever route made it (evals/environments/base.yaml's
`slim`): no docs, manuals or message translations, and none from a package installed on it later."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("no_leaks")

# a package built in the container (no network): a program, its docs, its licence, a manual, a translation
PACKAGE = r"""
set -e
root=/tmp/pkg
mkdir -p $root/DEBIAN $root/usr/bin $root/usr/share/doc/hello-slim $root/usr/share/man/man1 \
         $root/usr/share/locale/de/LC_TIME $root/usr/lib/python3.11/config-3.11-x86_64-linux-gnu
printf 'Package: hello-slim\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n' \
  > $root/DEBIAN/control
printf '#!/bin/sh\necho hello\n' > $root/usr/bin/hello-slim && chmod 755 $root/usr/bin/hello-slim
echo readme > $root/usr/share/doc/hello-slim/README
echo licence > $root/usr/share/doc/hello-slim/copyright
echo manual > $root/usr/share/man/man1/hello-slim.1
echo mo > $root/usr/share/locale/de/LC_TIME/hello-slim.mo
echo dump > $root/usr/bin/x86_64-linux-gnu-lto-dump-12
echo static > $root/usr/lib/python3.11/config-3.11-x86_64-linux-gnu/libpython3.11.a
echo shared > $root/usr/lib/python3.11/config-3.11-x86_64-linux-gnu/libpython3.11.so
dpkg-deb --build $root /tmp/hello-slim.deb >/dev/null
dpkg -i /tmp/hello-slim.deb >/dev/null
hello-slim
for path in /usr/share/doc/hello-slim/README /usr/share/doc/hello-slim/copyright /usr/share/man/man1/hello-slim.1 \
            /usr/share/locale/de/LC_TIME/hello-slim.mo /usr/bin/x86_64-linux-gnu-lto-dump-12 \
            /usr/lib/python3.11/config-3.11-x86_64-linux-gnu/libpython3.11.a \
            /usr/lib/python3.11/config-3.11-x86_64-linux-gnu/libpython3.11.so; do
  [ -e $path ] && echo "present $path" || echo "absent $path"
done
echo "docs left: $(find /usr/share/doc -type f ! -name copyright | wc -l)"
echo "licences: $(find /usr/share/doc -type f -name copyright | wc -l)"
echo "manuals left: $(find /usr/share/man -type f | wc -l)"
echo "translations left: $(find /usr/share/locale -name '*.mo' | wc -l)"
"""


def test_the_base_has_no_docs_manuals_or_translations_and_keeps_them_out_of_later_packages(base_image):
    from codeagent.sandbox.engine import docker_client

    output = docker_client().containers.run(base_image, ["bash", "-c", PACKAGE], network_mode="none",
                                            remove=True).decode()
    assert "hello" in output.splitlines()[0]
    assert "absent /usr/share/doc/hello-slim/README" in output
    assert "present /usr/share/doc/hello-slim/copyright" in output
    assert "absent /usr/share/man/man1/hello-slim.1" in output
    assert "absent /usr/share/locale/de/LC_TIME/hello-slim.mo" in output
    assert "absent /usr/bin/x86_64-linux-gnu-lto-dump-12" in output
    assert "absent /usr/lib/python3.11/config-3.11-x86_64-linux-gnu/libpython3.11.a" in output
    assert "present /usr/lib/python3.11/config-3.11-x86_64-linux-gnu/libpython3.11.so" in output
    assert "docs left: 0" in output and "manuals left: 0" in output and "translations left: 0" in output
    assert int(output.split("licences: ")[1].split()[0]) > 10  # the base's packages' licences stay
