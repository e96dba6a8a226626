"""What a variant may set, declared once: VariantSettings (variant.py), the shapes of its values
(shapes.py) and the fleet's hosts and boot keys (hosts.py). Shape only: what the machine offers
is env/'s to check."""
