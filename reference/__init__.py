"""The seed's objects as frozen attrs records and pure transitions that return receipts."""
