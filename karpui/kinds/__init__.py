"""The kinds karpui serves: names, versions, scope, where each is stored, its columns, and version conversion."""
