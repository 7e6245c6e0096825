"""Files of a stock ActiveMQ installation, for tests of what RelayMQ reads from them."""

from __future__ import annotations


def jetty_xml(port: int, authenticate: bool = True, host: str = "127.0.0.1") -> str:
    """ActiveMQ's conf/jetty.xml, in the parts RelayMQ maps: the realm's login
    service (users in jetty-realm.properties), the user and admin constraints
    (`authenticate` for the user one) and the web console's host and port."""
    return f"""<beans xmlns="http://www.springframework.org/schema/beans">
  <bean id="securityLoginService" class="org.eclipse.jetty.security.HashLoginService">
    <property name="name" value="ActiveMQRealm" />
    <property name="config" value="${{activemq.conf}}/jetty-realm.properties" />
  </bean>
  <bean id="securityConstraint" class="org.eclipse.jetty.util.security.Constraint">
    <property name="name" value="BASIC" />
    <property name="roles" value="user,admin" />
    <property name="authenticate" value="{str(authenticate).lower()}" />
  </bean>
  <bean id="adminSecurityConstraint" class="org.eclipse.jetty.util.security.Constraint">
    <property name="name" value="BASIC" />
    <property name="roles" value="admin" />
    <property name="authenticate" value="true" />
  </bean>
  <bean id="jettyPort" class="org.apache.activemq.web.WebConsolePort" init-method="start">
    <property name="host" value="{host}"/>
    <property name="port" value="{port}"/>
  </bean>
</beans>
"""
