"""Table maintenance: tags, rollback, snapshot expiration, orphan file cleanup."""
