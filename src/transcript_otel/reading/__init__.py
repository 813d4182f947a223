"""Reading captured runs back: finding them, their words, their aggregates, showing and checking them."""
