"""TLS for preemptd's own servers (``/metrics``, the admission webhook): a certificate and
key from files, served again after a rotation without a restart.

A rotated Secret changes its files in place (through a volume's symlinks). Loading a new
pair into the context a server listens with would leave that context half changed when the
new certificate is there but its key is not yet: every handshake would then fail. So each
pair is loaded into a fresh context, and only a pair that loads whole is handed to new
connections (the listening context's SNI callback); until then the previous pair is served.
"""

from __future__ import annotations

import logging
import os
import ssl

__all__ = ["CertificateError", "ReloadingCertificate", "server_context"]

log = logging.getLogger(__name__)


class CertificateError(OSError):
    """A certificate and key that cannot be served; the message names the files.

    An ``OSError``: ``preemptd run`` reports it as it reports an address it cannot bind."""


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A TLS server context (TLS 1.2 or newer) serving the PEM certificate chain and key."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except ssl.SSLError as exc:
        raise CertificateError(f"{cert_file}, {key_file}: not a PEM certificate and its key ({exc.reason})") from None
    except OSError as exc:
        raise CertificateError(f"cannot read {exc.filename or cert_file}: {exc.strerror or exc}") from None
    return context


Stamp = tuple[tuple[int, int, int] | None, ...]


class ReloadingCertificate:
    """A certificate and key from files, taken up again when the files change.

    :attr:`context` is the listening context; each new connection is handed the
    context of the pair last loaded (its SNI callback), so a server built on it
    serves a rotated certificate without a restart. Before any pair is loaded, a
    handshake fails.
    """

    def __init__(self, cert_file: str, key_file: str, *, what: str = "certificate") -> None:
        self.what = what  # how the log names it: "webhook certificate", "metrics certificate"
        self.cert_file = cert_file
        self.key_file = key_file
        self.reloads = 0  # pairs loaded after the first
        self._stamp: Stamp = ()
        self._current: ssl.SSLContext | None = None
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.sni_callback = self._hand_over

    @property
    def loaded(self) -> bool:
        return self._current is not None

    def load(self) -> None:
        """Load the files now; :class:`CertificateError` if they cannot be served."""
        self._stamp = self._files()
        self._current = server_context(self.cert_file, self.key_file)

    def _files(self) -> Stamp:
        stamps: list[tuple[int, int, int] | None] = []
        for path in (self.cert_file, self.key_file):
            try:
                found = os.stat(path)  # through the symlinks of a Secret volume
            except OSError:
                stamps.append(None)
            else:
                stamps.append((found.st_ino, found.st_mtime_ns, found.st_size))
        return tuple(stamps)

    def _hand_over(self, connection: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> int | None:
        current = self._current
        if current is None:
            return ssl.ALERT_DESCRIPTION_HANDSHAKE_FAILURE
        connection.context = current
        return None

    def refresh(self) -> bool:
        """Load the files again if they changed; True when a new pair is now served."""
        stamp = self._files()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            fresh = server_context(self.cert_file, self.key_file)
        except CertificateError as exc:
            log.warning("%s changed but cannot be loaded; the previous one is still served: %s", self.what, exc)
            return False
        if self._current is not None:
            self.reloads += 1
        self._current = fresh
        log.info("%s loaded from %s", self.what, self.cert_file)
        return True
