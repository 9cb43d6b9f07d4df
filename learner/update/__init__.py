"""The update: the SAC losses, networks, normalizer and optimizer, the state SAC and the pixel
SACs (the conv encoder, the privileged teacher) built from them."""
