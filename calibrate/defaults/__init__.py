"""The bundled profiles' fitted and derived defaults: `fit` fits them on the bundled measurements,
`write` puts them into hwprofiles/*.yaml (`python -m calibrate.defaults [--write]`)."""
