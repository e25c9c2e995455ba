"""textclass/: a small text classifier (labelled documents, dynamic or table word embeddings, one attention layer)."""
