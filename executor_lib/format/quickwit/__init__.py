"""The Quickwit split bundle a ``.split`` file is (``bundle``) and its hotcache (``hotcache``)."""
