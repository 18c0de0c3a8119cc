"""Issue 11, item 2: one login throttle for karpui's login page and the admin's, keyed on the account as Django
compares usernames (so Unicode and case variants share it), counted atomically (so a burst cannot slip past it)."""

import threading

import pytest
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_login_failed
from django.core.cache import cache
from django.db import connection
from django.test import Client

from karpui.web.login import account_key

PASSWORD = "pw-only-for-tests"
LOCKED = "Too many failed logins for this account; try again in 15 minutes."


@pytest.fixture
def checked():
    """Every password Django actually checked and found wrong (a refused attempt never gets that far)."""
    seen: list[str] = []

    def record(sender, credentials, **kwargs):
        seen.append(credentials["username"])

    user_login_failed.connect(record)
    yield seen
    user_login_failed.disconnect(record)


@pytest.fixture
def three_failures(settings):
    settings.KARPUI_LOGIN_MAX_FAILURES = 3


def log_in(form, username, password, client=None):
    return (client or Client()).post(form, {"username": username, "password": password})


def test_an_account_is_locked_after_its_failures_even_with_the_right_password_from_anywhere(
    lab, three_failures, checked
):
    User.objects.create_user("tess", password=PASSWORD)
    for _ in range(3):
        refused = log_in("/accounts/login/", "tess", "wrong")
        assert refused.status_code == 200 and "Please enter a correct username" in refused.content.decode()

    client = Client(REMOTE_ADDR="10.0.0.9")
    locked = log_in("/accounts/login/", "tess", PASSWORD, client)

    assert locked.status_code == 429 and LOCKED in locked.content.decode()
    assert "_auth_user_id" not in client.session
    assert log_in("/accounts/login/", "tess", "another guess").status_code == 429
    assert checked == ["tess"] * 3  # the attempts after the lock were refused without checking the password
    cache.delete(account_key("tess"))  # the lockout lapses (clear() would flush Celery's Redis)
    assert log_in("/accounts/login/", "tess", PASSWORD).status_code == 302


def test_the_admins_login_form_shares_the_throttle(lab, three_failures):
    User.objects.create_superuser("root", password=PASSWORD)
    log_in("/accounts/login/", "root", "wrong")
    log_in("/admin/login/", "root", "wrong")
    log_in("/admin/login/", "root", "wrong")

    client = Client()
    locked = client.post("/admin/login/?next=/admin/", {"username": "root", "password": PASSWORD, "next": "/admin/"})

    assert locked.status_code == 429 and LOCKED in locked.content.decode()
    assert "_auth_user_id" not in client.session
    assert log_in("/accounts/login/", "root", PASSWORD).status_code == 429


@pytest.mark.parametrize("variant", ["ｔｅｓｓ", "TESS", "Tess", "ｔｅｓｓ "])
def test_unicode_and_case_variants_of_a_username_count_against_the_same_lock(lab, three_failures, variant):
    User.objects.create_user("tess", password=PASSWORD)
    for _ in range(3):
        assert log_in("/accounts/login/", variant, "wrong").status_code == 200

    assert log_in("/accounts/login/", "tess", PASSWORD).status_code == 429
    assert log_in("/accounts/login/", variant, PASSWORD).status_code == 429


def test_a_full_width_username_is_the_same_account_and_its_right_password_clears_the_count(lab, three_failures):
    User.objects.create_user("tess", password=PASSWORD)
    log_in("/accounts/login/", "tess", "wrong")
    log_in("/accounts/login/", "tess", "wrong")

    assert log_in("/accounts/login/", "ｔｅｓｓ", PASSWORD).status_code == 302  # Django's NFKC: the same account
    for _ in range(3):
        assert log_in("/accounts/login/", "tess", "wrong").status_code == 200
    assert log_in("/accounts/login/", "tess", PASSWORD).status_code == 429


def test_a_right_password_for_an_account_the_admin_does_not_admit_is_not_a_failure(lab, three_failures):
    User.objects.create_user("viktor", password=PASSWORD)  # not staff
    log_in("/admin/login/", "viktor", "wrong")
    log_in("/admin/login/", "viktor", "wrong")

    refused = log_in("/admin/login/", "viktor", PASSWORD)

    assert refused.status_code == 200 and "staff account" in refused.content.decode()
    assert cache.get(account_key("viktor")) is None


def concurrently(passwords: list[str]) -> list[tuple[str, int]]:
    """Log in to tess with each password at once, from threads released together: (password, status) each."""
    start = threading.Barrier(len(passwords))
    statuses: list[tuple[str, int]] = []

    def attempt(password):
        try:
            start.wait()
            statuses.append((password, log_in("/accounts/login/", "tess", password).status_code))
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt, args=(password,)) for password in passwords]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return statuses


@pytest.mark.django_db(transaction=True)
def test_forty_concurrent_wrong_passwords_get_exactly_the_limit_checked(settings, checked):
    settings.KARPUI_LOGIN_MAX_FAILURES = 5
    # Django's real hasher (the suite's default is MD5): each check takes long enough that the forty overlap in it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    User.objects.create_user("tess", password=PASSWORD)

    statuses = [status for _, status in concurrently(["wrong"] * 40)]

    assert len(checked) == 5
    assert sorted(statuses) == [200] * 5 + [429] * 35


@pytest.mark.django_db(transaction=True)
def test_ten_concurrent_right_passwords_all_log_in(settings, checked):
    """Issue 27, point 9: the throttle counted attempts, so ten people (or a deploy's ten replicas of a script)
    logging in to one account at once had five refused with 429. It counts failures: checks beyond the limit's
    worth at once wait for the earlier ones to finish, and a right password fails nothing."""
    settings.KARPUI_LOGIN_MAX_FAILURES = 5
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    User.objects.create_user("tess", password=PASSWORD)

    statuses = [status for _, status in concurrently([PASSWORD] * 10)]

    assert (statuses, checked) == ([302] * 10, [])
    assert cache.get(account_key("tess")) is None


@pytest.mark.django_db(transaction=True)
def test_concurrent_right_and_wrong_passwords_check_no_more_guesses_than_the_limit(settings, checked):
    """No more guesses are checked than some one-at-a-time order of the same attempts would check. A right password
    clears the count (as Django's peers do: django-axes' reset on success), so one at a time the most is two guesses
    before each right password (it needs a place beside them: failures plus checks never pass the limit) and three
    after the last: 2 + 2 + 3 = 7 with both logged in, exactly 3 with neither. Every guess is either checked (200) or
    refused unchecked (429)."""
    settings.KARPUI_LOGIN_MAX_FAILURES = 3
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    User.objects.create_user("tess", password=PASSWORD)

    statuses = concurrently(["wrong"] * 10 + [PASSWORD] * 2)

    wrong = [status for password, status in statuses if password == "wrong"]
    right = [status for password, status in statuses if password == PASSWORD]
    logged_in = right.count(302)
    assert set(wrong) <= {200, 429} and set(right) <= {302, 429}
    assert wrong.count(200) == len(checked)
    assert len(checked) <= (3 - 1) * logged_in + 3
    if logged_in == 0:
        assert len(checked) == 3
