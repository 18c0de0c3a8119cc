"""The one error type for bad manifests: it names the document, the object and the field."""

from __future__ import annotations


class ManifestError(ValueError):
    """A manifest that cannot be accepted. `field` is a dotted path like `spec.weight`."""

    def __init__(
        self, message: str, *, field: str = "", document: int | None = None, kind: str = "", name: str = ""
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.document = document
        self.kind = kind
        self.name = name

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
