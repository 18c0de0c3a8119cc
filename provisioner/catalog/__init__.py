"""Instance-type catalogs: the types, their offerings and allocatable, and where catalogs come from."""

from provisioner.catalog.instance_type import Catalog, InstanceType, Offering, Overhead

__all__ = ["Catalog", "InstanceType", "Offering", "Overhead"]
