"""Storage primitives: file names, locks and no-clobber publishing, the Arrow memory pool."""
