"""Moving runs between stores and bundles: export (a verified, self-contained bundle) and import."""
