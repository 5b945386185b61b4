"""The composition of Hazel: the engine with its channels and delivery (``app``), the HTTP app (``http``), the
channels and routers built from settings (``wiring``), and the long-running processes (``processes``:
``hazel serve``, ``hazel worker``)."""
