"""Routers: which replica a new request goes to (`registry.make_router` by name); `pick` sees the
replicas' schedulers."""
