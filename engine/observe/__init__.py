"""What the table reports: RO freshness, backlog metrics, descriptions of its layout."""
