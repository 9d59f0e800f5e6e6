"""What select and memory recall share: lexical query building (`query`), rank and score
fusion (`fusion`), and exact vector search over an in-memory matrix (`vectors`)."""
