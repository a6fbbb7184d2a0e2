# The operator image: the ansible-operator runtime at the same version the tests run
# (hack/versions.env ANSIBLE_OPERATOR_VERSION) plus our playbooks, roles and plugins.
# etcd's own image provides etcdctl and etcdutl for the backup and restore Jobs, which run this
# image, and etcd itself: a restore to a point of a continuous backup replays it into a
# throw-away etcd on loopback (backup/point_restore.py). Keep the tag equal to DEFAULT_ETCD_TAG in plugins/module_utils/karmada_operator/components.py
# (tests/unit/test_karmada_components.py checks it).
ARG ETCD_IMAGE=registry.k8s.io/etcd:3.6.6-0
FROM ${ETCD_IMAGE} AS etcd

FROM quay.io/operator-framework/ansible-operator:v1.42.0
COPY --from=etcd /usr/local/bin/etcd /usr/local/bin/etcdctl /usr/local/bin/etcdutl /usr/local/bin/

# Python packages and, through PyPI's `ansible` package, the collections we use
# (kubernetes.core, community.crypto): the same pins as local runs and CI.
COPY requirements.txt ${HOME}/requirements.txt
RUN python3 -m pip install --no-cache-dir -r ${HOME}/requirements.txt \
 && chmod -R ug+rwx ${HOME}/.ansible

COPY watches.yaml ${HOME}/watches.yaml
COPY ansible.cfg ${HOME}/ansible.cfg
COPY playbooks/ ${HOME}/playbooks/
COPY roles/ ${HOME}/roles/
COPY plugins/ ${HOME}/plugins/
ENV ANSIBLE_CONFIG=${HOME}/ansible.cfg
# Our Python package, karmada_operator: the plugins import it, the backup and restore Jobs run it.
ENV PYTHONPATH=${HOME}/plugins/module_utils
