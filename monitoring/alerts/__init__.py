"""Alerting: rule catalogue, pure evaluation, lifecycle services, notifications, UI and API."""
