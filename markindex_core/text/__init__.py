"""Text analysis shared by indexing and search: mixed Chinese/English segmentation, stopwords, token estimates."""
