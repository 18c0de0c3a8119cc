"""The one error type for bad manifests: it names the document, the object and the field."""

from __future__ import annotations

# An error quotes the input it refuses (a value, a key, a name); these bound how much of it comes back, so a
# megabyte-long value is not echoed to the terminal, the page and the log.
MAX_MESSAGE = 1000
MAX_PATH = 300
MAX_NAME = 253


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


class ManifestError(ValueError):
    """A manifest that cannot be accepted. `field` is a dotted path like `spec.weight`."""

    def __init__(
        self, message: str, *, field: str = "", document: int | None = None, kind: str = "", name: str = ""
    ) -> None:
        message = clip(message, MAX_MESSAGE)
        super().__init__(message)
        self.message = message
        self.field = clip(field, MAX_PATH)
        self.document = document
        self.kind = clip(kind, MAX_NAME)
        self.name = clip(name, MAX_NAME)

    def located(self, *, document: int | None = None, kind: str = "", name: str = "") -> ManifestError:
        """The same error with the document's position and identity filled in where still unknown."""
        return ManifestError(
            self.message,
            field=self.field,
            document=self.document if self.document is not None else document,
            kind=self.kind or kind,
            name=self.name or name,
        )

    def __str__(self) -> str:
        where = []
        if self.document is not None:
            where.append(f"document {self.document}")
        if self.kind or self.name:
            where.append(f"{self.kind or '?'}/{self.name or '?'}")
        prefix = f"{' '.join(where)}: " if where else ""
        field = f"{self.field}: " if self.field else ""
        return f"error: {prefix}{field}{self.message}"


class DecodeError(ManifestError):
    """A value of the wrong JSON type for its Go field: kube-apiserver cannot decode the object at all (a 400,
    `Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number into Go struct field ...`), where
    a value it decodes but refuses is a 422."""
