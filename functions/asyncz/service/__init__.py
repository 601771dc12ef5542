"""The job service, composed of its parts."""

from asyncz.service.job_service import JobService

__all__ = ["JobService"]
