"""``protoframe diff``: what a change of a protocol's specs means for peers and for code.

Two versions of a spec directory are loaded with the generator's own loaders and compared as
validated models (``snapshot``), never as text; each difference is a ``Change`` named by a
stable rule id (``rules``) and classified on two axes, wire and source. ``lock`` keeps the
numbers and layouts a protocol has ever used, ``report`` prints the changes, ``docs_changes``
puts them on the reference pages when asked for, and ``command`` ties it together for the
command line.
"""
