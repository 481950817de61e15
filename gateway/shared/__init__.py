"""State that replicas of the gateway share: the seam (`state`), its Redis side (`redisstate`), the `store` section."""
