from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "webapp.accounts"
    label = "accounts"

    def ready(self) -> None:
        from webapp.accounts import throttle  # noqa: F401  (connects the failed-login audit)
