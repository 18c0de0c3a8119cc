"""Dynamic Resource Allocation: DeviceClass CEL selectors, device requests, and allocating devices to claims."""
